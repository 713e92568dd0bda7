package cudastage

import (
	"path/filepath"
	"sync"
	"testing"
)

// routeFixtures are files of every route: engines (or CUDA without them),
// CUDA only (progressive), none (CMYK, arithmetic-coded, corrupt, not a JPEG).
func routeFixtures(t testing.TB) map[string][]byte {
	st := func(name string) []byte {
		return readFixture(t, filepath.Join("..", "stages", "testdata", name))
	}
	good := st("sub420.jpg")
	return map[string][]byte{
		"sub420": good, "sub444": st("sub444.jpg"), "orient_6": st("orient_6.jpg"),
		"progressive": st("progressive.jpg"), "cmyk": st("cmyk.jpg"),
		"truncated header": good[:40], "soi only": {0xFF, 0xD8},
		"arithmetic": st(filepath.Join("arith", "arith420.jpg")), "arithmetic progressive": st(filepath.Join("arith", "arith_progressive.jpg")),
	}
}

// TestDecodeRouteConcurrent: DecodeRoute, called by many goroutines at once
// (as the decode workers do, with no bound thread and no lock on the common
// path), answers each file as it does alone, and makes no more parsers than
// callers at once.
func TestDecodeRouteConcurrent(t *testing.T) {
	d := jpegDevice(t)
	files := routeFixtures(t)
	want := map[string]string{}
	for name, f := range files {
		want[name] = d.DecodeRoute(f)
		t.Logf("%s: %q", name, want[name])
	}
	for _, name := range []string{"cmyk", "arithmetic", "arithmetic progressive", "truncated header", "soi only"} {
		if want[name] != "" {
			t.Errorf("%s: route %q; CMYK, arithmetic-coded and corrupt files must go to the CPU", name, want[name])
		}
	}
	if want["sub420"] == "" {
		t.Errorf("sub420.jpg has no device route")
	}
	const callers, rounds = 24, 50
	var wg sync.WaitGroup
	errs := make(chan string, callers*len(files))
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				for name, f := range files {
					if got := d.DecodeRoute(f); got != want[name] {
						errs <- name + ": " + got + ", want " + want[name]
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	c, _ := d.jpeg()
	c.mu.Lock()
	n := len(c.allParse)
	c.mu.Unlock()
	if n > callers+1 || n > maxRouteParsers {
		t.Errorf("%d parsers for %d concurrent callers", n, callers)
	}
}

// BenchmarkDecodeRoute: DecodeRoute's cost per file over concurrent
// callers (b.RunParallel, GOMAXPROCS goroutines), for a file the engines
// take (the common case) and one only the CUDA decoder takes.
func BenchmarkDecodeRoute(b *testing.B) {
	d := jpegDevice(b)
	files := routeFixtures(b)
	for _, name := range []string{"sub420", "progressive"} {
		f := files[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(f)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					d.DecodeRoute(f)
				}
			})
		})
	}
}

// TestDecodeRouteOpensNVJPEGOnlyWhenItMayDecode: asking about a file nvJPEG cannot decode (CMYK,
// arithmetic-coded, no frame header, not a JPEG) answers "" without opening nvJPEG, which takes
// a run about half a second; asking about a baseline JPEG opens it.
func TestDecodeRouteOpensNVJPEGOnlyWhenItMayDecode(t *testing.T) {
	d := testDevice(t)
	files := routeFixtures(t)
	for _, name := range []string{"cmyk", "arithmetic", "arithmetic progressive", "soi only"} {
		if got := d.DecodeRoute(files[name]); got != "" {
			t.Errorf("%s: route %q, want none", name, got)
		}
	}
	if got := d.DecodeRoute([]byte("\x89PNG\r\n\x1a\n")); got != "" {
		t.Errorf("a PNG: route %q, want none", got)
	}
	if d.codec.cuda != nil {
		t.Fatal("nvJPEG was opened to refuse files it cannot decode")
	}
	if got := d.DecodeRoute(files["sub420"]); got == "" && d.DecoderAvailable() == nil {
		t.Error("sub420.jpg: no route")
	}
	if d.codec.cuda == nil && d.DecoderAvailable() == nil {
		t.Error("nvJPEG's handle is not where this test looks for it: the check above proves nothing")
	}
}
