package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// maxFuzzAlloc bounds what reading a fuzzed report may allocate: a few times its bytes (a
// parsed line is larger than its text) and the scanner's buffer.
func maxFuzzAlloc(data []byte) uint64 { return 64*uint64(len(data)) + 4*maxReportLine }

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

const fuzzChain = "decode | histogram"

// reportSeeds are reports a run writes, and hostile ones: truncated, duplicated, crafted.
func reportSeeds() []string {
	line := `{"input":"a.png","status":"ok","pipeline":"` + fuzzChain + `","size":3,"mtime_ns":7,"width":1,"height":1}`
	sum := `{"summary":{"pipeline":"` + fuzzChain + `","ok":1}}`
	return []string{
		line + "\n" + sum + "\n", line + "\n", line[:20], line + "\n" + line + "\n" + sum + "\n",
		sum + "\n" + line + "\n", `{"input":"a.png","status":"done"}` + "\n" + sum + "\n",
		`{"input":"","input_base64":"/w==","status":"ok"}` + "\n" + sum + "\n", "\n\n\n", "{", "null\n",
		`{"input":"b.png","status":"skipped","pipeline":"` + fuzzChain + `"}` + "\n" + line + "\n",
	}
}

// FuzzReadReport feeds arbitrary bytes to the shard report reader that report merge uses:
// it must return lines and a summary or an error, never panic, in bounded memory; what it
// accepts writes back as a report that reads the same.
func FuzzReadReport(f *testing.F) {
	for _, s := range reportSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var lines []ReportLine
		var sum Summary
		var err error
		if n := allocated(func() { lines, sum, err = ReadReport(bytes.NewReader(data)) }); n > maxFuzzAlloc(data) {
			t.Fatalf("%d bytes allocated for a %d-byte report", n, len(data))
		}
		if err != nil {
			return
		}
		for _, l := range lines {
			if l.Input == "" || l.Status != StatusOK && l.Status != StatusFailed && l.Status != StatusSkipped {
				t.Fatalf("accepted line %+v", l)
			}
		}
		var b bytes.Buffer
		if err := WriteReport(&b, lines, sum); err != nil {
			t.Fatal(err)
		}
		again, _, err := ReadReport(&b)
		if err != nil || len(again) != len(lines) {
			t.Fatalf("written back: %d lines, %v; read %d", len(again), err, len(lines))
		}
	})
}

// FuzzResume feeds arbitrary bytes as the journal a killed run left: resume must never
// panic, stays in bounded memory, and skips an input only on a line that says it was done
// by this chain, from this file, with its output there.
func FuzzResume(f *testing.F) {
	for _, s := range reportSeeds() {
		f.Add([]byte(s))
	}
	plan, err := CompileSpec(fuzzChain)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src := Inputs(Input{Name: "a.png", Size: 3}, Input{Name: "b.png"}, Input{Name: "c/d.png"})
		has := func(context.Context, string) bool { return true }
		var skipped []Input
		n := allocated(func() {
			res := ResumeOutputs(src, plan, has, bytes.NewReader(data))
			for {
				in, err := res.Next(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if in.Previous != nil {
					skipped = append(skipped, in)
				}
			}
		})
		if n > maxFuzzAlloc(data) {
			t.Fatalf("%d bytes allocated for a %d-byte journal", n, len(data))
		}
		for _, in := range skipped {
			l := in.Previous
			if l.name() != in.Name || l.Pipeline != plan.String() || l.Status != StatusOK && l.Status != StatusSkipped ||
				in.Size != 0 && l.Size != in.Size || !strings.Contains(string(data), `"status"`) {
				t.Fatalf("%s skipped on %+v", in.Name, l)
			}
		}
	})
}
