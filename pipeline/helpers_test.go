package pipeline

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/stages"
)

// testStages is a registry with the builtin stages plus test stages:
//   - jitter sleeps 0..0.9 ms depending on the first pixel, to shuffle completion order;
//   - boom panics on an image whose first pixel is 0xEE.
func testStages(t testing.TB) *Registry {
	t.Helper()
	jitter := &StageDef{Name: "jitter", Kind: PixelKind, Help: "sleeps a little",
		Shape: func(in stages.Shape, _ Params) (stages.Shape, bool) { return in, true },
		CPU: func(Params) (CPUFunc, error) {
			return func(_, src *stages.Image, _ *[256]uint64) {
				time.Sleep(time.Duration(src.Pix[0]%4) * 300 * time.Microsecond)
			}, nil
		}}
	boom := &StageDef{Name: "boom", Kind: PixelKind, Help: "panics on 0xEE",
		Shape: func(in stages.Shape, _ Params) (stages.Shape, bool) { return in, true },
		CPU: func(Params) (CPUFunc, error) {
			return func(_, src *stages.Image, _ *[256]uint64) {
				if src.Pix[0] == 0xEE {
					panic("boom")
				}
			}, nil
		}}
	r, err := NewRegistry(decodeDef, grayscaleDef, blurDef, transposeDef, histogramDef, saveDef, jitter, boom)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func compileWith(t testing.TB, r *Registry, spec string) *Plan {
	t.Helper()
	steps, err := r.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Compile(steps)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// checkNoLeaks waits for the goroutine count to come back to base, and fails with the
// remaining stacks if it does not.
func checkNoLeaks(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines left, want %d:\n%s", runtime.NumGoroutine(), base, buf[:n])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func reportLines(t *testing.T, report string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(report, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], `{"summary":`) {
		t.Fatalf("report does not end with a summary line:\n%s", report)
	}
	return lines
}
