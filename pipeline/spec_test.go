package pipeline

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		spec string
		want string // canonical form
	}{
		{"decode", "decode"},
		{"decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png",
			"decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png"},
		{"  decode|grayscale|save  ", "decode | grayscale | save"},
		{"decode\t|\tblur   sigma=3.0\n| save", "decode | blur sigma=3 | save"},
		{"decode max_pixels=1000 orient=false | save quality=80 format=jpeg", "decode max_pixels=1000 orient=false | save format=jpeg quality=80"},
		{"decode | boxblur radius=0 | boxblur radius=15 | save compression=9", "decode | boxblur radius=0 | boxblur radius=15 | save compression=9"},
		{"decode | blur sigma=32 | blur sigma=1e-3", "decode | blur sigma=32 | blur sigma=0.001"},
		{"decode | blur", "decode | blur"}, // defaults are not spelled out
		{"decode orient=TRUE", "decode orient=true"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			steps, err := ParseSpec(tt.spec)
			if err != nil {
				t.Fatalf("ParseSpec: %v", err)
			}
			if got := FormatSpec(steps); got != tt.want {
				t.Errorf("FormatSpec = %q, want %q", got, tt.want)
			}
			again, err := ParseSpec(FormatSpec(steps))
			if err != nil || FormatSpec(again) != tt.want {
				t.Errorf("round trip: %q, %v", FormatSpec(again), err)
			}
		})
	}
}

func TestParseSpecValues(t *testing.T) {
	steps, err := ParseSpec("decode max_pixels=5000 orient=false | blur sigma=2.5 | boxblur radius=3 | save format=jpeg quality=70")
	if err != nil {
		t.Fatal(err)
	}
	if got := steps[0].Params.Int("max_pixels"); got != 5000 {
		t.Errorf("max_pixels = %d", got)
	}
	if steps[0].Params.Bool("orient") {
		t.Error("orient = true")
	}
	if got := steps[1].Params.Float("sigma"); got != 2.5 {
		t.Errorf("sigma = %v", got)
	}
	if got := steps[2].Params.Int("radius"); got != 3 {
		t.Errorf("radius = %d", got)
	}
	if got := steps[3].Params.Str("format"); got != "jpeg" {
		t.Errorf("format = %q", got)
	}
	if got := steps[3].Params.Str("compression"); got != "fast" {
		t.Errorf("compression default = %q", got)
	}
	if steps[1].Pos.Col != 39 {
		t.Errorf("blur at col %d, want 39", steps[1].Pos.Col)
	}
}

func TestParseSpecErrors(t *testing.T) {
	type want struct {
		col int
		msg string
	}
	tests := []struct {
		spec string
		errs []want
	}{
		{"", []want{{1, "empty pipeline spec"}}},
		{"   ", []want{{1, "empty pipeline spec"}}},
		{"decode | blurr sigma=1.5", []want{{10, `unknown stage "blurr" (did you mean "blur"?)`}}},
		{"decode | grayscal", []want{{10, `(did you mean "grayscale"?)`}}},
		{"decode | xyzzy", []want{{10, `unknown stage "xyzzy" (stages: ` + strings.Join(Builtin.names(), ", ") + ")"}}},
		{"decode | blur sigm=1.5", []want{{15, `blur has no parameter "sigm" (did you mean "sigma"?)`}}},
		{"decode | transpose x=1", []want{{20, `transpose has no parameter "x" (it takes none)`}}},
		{"decode | blur 1.5", []want{{15, `"1.5" is not key=value (blur takes sigma)`}}},
		{"decode | blur =1.5", []want{{15, `"=1.5" is not key=value`}}},
		{"decode | blur sigma=", []want{{15, `no value after sigma=`}}},
		{"decode | blur sigma=0", []want{{21, `sigma=0 is out of range (0, 32]`}}},
		{"decode | blur sigma=33", []want{{21, `sigma=33 is out of range (0, 32]`}}},
		{"decode | blur sigma=abc", []want{{21, `sigma=abc: want a number`}}},
		{"decode | blur sigma=NaN", []want{{21, `want a number`}}},
		{"decode | blur sigma=inf", []want{{21, `want a number`}}},
		{"decode | boxblur radius=1.5", []want{{25, `radius=1.5: want an integer`}}},
		{"decode | boxblur radius=16", []want{{25, `out of range [0, 15]`}}},
		{"decode | boxblur radius=010", nil}, // base 10, not octal: 10 is fine
		{"decode orient=maybe", []want{{15, `orient=maybe: want true or false`}}},
		{"decode | save format=gif", []want{{22, `format=gif: want one of png, jpeg`}}},
		{"decode | save format=jpg", []want{{22, `(did you mean "jpeg"?)`}}},
		{"decode | blur sigma=1 sigma=2", []want{{23, `sigma given twice (first at col 21)`}}},
		{"decode || save", []want{{9, `empty stage before '|'`}}},
		{"decode | save |", []want{{16, `nothing after the last '|'`}}},
		{"| decode", []want{{1, `empty stage before '|'`}}},
		// Every error is reported, not only the first.
		{"decod | blurr | save format=gif quality=0", []want{
			{1, `unknown stage "decod"`},
			{9, `unknown stage "blurr"`},
			{29, `format=gif`},
			{41, `quality=0 is out of range [1, 100]`},
		}},
		// Columns count characters, not bytes.
		{"décode | blur", []want{{1, `unknown stage "décode"`}}},
		{"decode | blur σ=1", []want{{15, `blur has no parameter "σ"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := ParseSpec(tt.spec)
			if tt.errs == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			got := Errors(err)
			if len(got) != len(tt.errs) {
				t.Fatalf("got %d errors, want %d:\n%v", len(got), len(tt.errs), err)
			}
			for i, w := range tt.errs {
				var pe *PosError
				if !errors.As(got[i], &pe) {
					t.Fatalf("error %d is %T, not *PosError: %v", i, got[i], got[i])
				}
				if pe.Pos.Col != w.col {
					t.Errorf("error %d at col %d, want %d: %v", i, pe.Pos.Col, w.col, pe)
				}
				if !strings.Contains(pe.Error(), w.msg) {
					t.Errorf("error %d = %q, want it to contain %q", i, pe.Error(), w.msg)
				}
			}
		})
	}
}

func TestParseSpecLimits(t *testing.T) {
	long := strings.Repeat("grayscale | ", MaxSteps+1)
	if _, err := ParseSpec("decode | " + long + "save"); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("too many stages: %v", err)
	}
	if _, err := ParseSpec(strings.Repeat("x", maxSpecBytes+1)); err == nil || !strings.Contains(err.Error(), "byte limit") {
		t.Errorf("too long: %v", err)
	}
}

func TestNearest(t *testing.T) {
	names := []string{"blur", "boxblur", "decode", "grayscale", "histogram", "save", "transpose"}
	tests := map[string]string{
		"blurr": "blur", "Blur": "blur", "gray": "", "grayscal": "grayscale", "histgram": "histogram",
		"sav": "save", "x": "", "transpoes": "transpose", "decoder": "decode", "": "",
		strings.Repeat("b", 200): "",
	}
	for in, want := range tests {
		if got := Nearest(in, names); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
	formats := []string{"png", "jpeg", "webp", "tiff", "npy"}
	for in, want := range map[string]string{
		"pgn": "png", "jpg": "jpeg", "JPEG": "jpeg", "tif": "tiff", "wepb": "webp", "gif": "", "bmp": "", "np": "npy",
	} {
		if got := Nearest(in, formats); got != want {
			t.Errorf("Nearest(%q, formats) = %q, want %q", in, got, want)
		}
	}
}

func TestLookupAt(t *testing.T) {
	tests := []struct {
		name, want string // want: the stage found, or a fragment of the error
	}{
		{"blur", "blur"},
		{"blurr", `3:7: unknown stage "blurr" (did you mean "blur"?)`},
		{"zzz", `3:7: unknown stage "zzz" (stages: `},
	}
	for _, tt := range tests {
		def, err := Builtin.LookupAt(tt.name, Pos{Line: 3, Col: 7})
		var pe *PosError
		switch {
		case err == nil && def.Name != tt.want:
			t.Errorf("LookupAt(%q) = %s, want %s", tt.name, def.Name, tt.want)
		case err != nil && (!errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("LookupAt(%q) = %v, want a *PosError containing %q", tt.name, err, tt.want)
		}
	}
}

func TestParseParams(t *testing.T) {
	blur, _ := Builtin.Lookup("blur")
	tests := []struct {
		name string
		args map[string]string
		want string   // the canonical form, when errs is empty
		errs []string // fragments of each error, in order
	}{
		{"none", nil, "", nil},
		{"sigma", map[string]string{"sigma": "2.50"}, "sigma=2.5", nil},
		{"out of range", map[string]string{"sigma": "40"}, "", []string{"1:9: blur: sigma=40 is out of range"}},
		{"unknown name", map[string]string{"sigm": "1", "sigma": "x"}, "", []string{
			`1:9: blur has no parameter "sigm" (did you mean "sigma"?)`, `1:9: blur: sigma=x: want a number`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pos := map[string]Pos{}
			for k := range tt.args {
				pos[k] = Pos{Line: 1, Col: 9}
			}
			p, err := ParseParams(blur, tt.args, pos)
			got := Errors(err)
			if len(got) != len(tt.errs) {
				t.Fatalf("errors %v, want %d", err, len(tt.errs))
			}
			for i, w := range tt.errs {
				if !strings.Contains(got[i].Error(), w) {
					t.Errorf("error %d = %v, want %q", i, got[i], w)
				}
			}
			if err == nil && p.String() != tt.want {
				t.Errorf("params %q, want %q", p.String(), tt.want)
			}
		})
	}
}
