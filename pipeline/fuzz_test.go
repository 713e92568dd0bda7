package pipeline

import (
	"errors"
	"testing"
	"unicode/utf8"
)

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png",
		"decode max_pixels=1000 orient=false | boxblur radius=15 | save format=jpeg quality=1",
		"decode|save", "", "|", "||", "decode |", "blur sigma=", "=", "a=b=c", "decode x=1 x=1",
		"decode | blur sigma=1e308", "decode | blur sigma=-0", "décode ünïcode=ü", "decode\x00| save",
		"decode | save compression=0", "\t\n decode \r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		steps, err := ParseSpec(spec)
		if err != nil {
			cols := utf8.RuneCountInString(spec) + 1
			for _, e := range Errors(err) {
				var pe *PosError
				if !errors.As(e, &pe) {
					t.Fatalf("error without position: %v", e)
				}
				if pe.Pos.Col < 1 || pe.Pos.Col > cols {
					t.Fatalf("column %d outside 1..%d: %v", pe.Pos.Col, cols, e)
				}
			}
			// The one-pass check keeps every parse error and adds only the chain's.
			_, all := CompileSpec(spec)
			seen := map[string]bool{}
			for _, e := range Errors(all) {
				seen[e.Error()] = true
			}
			for _, e := range Errors(err) {
				if !seen[e.Error()] {
					t.Fatalf("CompileSpec lost %q: %v", e, all)
				}
			}
			return
		}
		if len(steps) == 0 {
			t.Fatal("accepted a spec with no stages")
		}
		canon := FormatSpec(steps)
		again, err := ParseSpec(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, spec, err)
		}
		if FormatSpec(again) != canon {
			t.Fatalf("round trip: %q -> %q", canon, FormatSpec(again))
		}
		for i := range steps {
			if err := steps[i].Params.check(steps[i].Def); err != nil {
				t.Fatalf("accepted invalid parameters: %v", err)
			}
		}
		// The planner accepts or refuses the same chain whichever way it was written.
		_, err1 := Compile(steps)
		_, err2 := Compile(again)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("planner disagrees: %v vs %v", err1, err2)
		}
	})
}
