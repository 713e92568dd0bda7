package stages

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
	"time"
)

// fuzzDecodeTime bounds one decode of FuzzDecode (1 MP at most).
const fuzzDecodeTime = 2 * time.Second

// fuzzStreamHead is the head FuzzDecode gives a streamed decode: small, so that most of a
// fuzzed file is read from the stream rather than replayed.
const fuzzStreamHead = 64

// FuzzDecode checks that no input panics Decode or DecodeStream and that a successful
// decode returns a consistent RGB image within the limit, the same pixels both ways.
// Slow and greedy inputs are findings too: a decode may take at most fuzzDecodeTime and
// allocate at most what DecodeCost charges for it plus a few times the file (a scan bomb
// or a decoder that allocates beyond its working set fails); a streamed decode, which the
// run charges without the file's bytes, may not allocate in proportion to the file.
func FuzzDecode(f *testing.F) {
	for _, data := range fixtures(f) {
		f.Add(data)
	}
	for _, data := range decodeCases(f) {
		f.Add(data)
	}
	f.Add(exifJPEG(binary.LittleEndian, 3, 6))
	f.Add(tiffIFDFirst(30, 20))
	f.Fuzz(func(t *testing.T, data []byte) {
		opt := DecodeOptions{MaxPixels: 1 << 20, Orient: true}
		var work int64
		if c, cerr := DecodeCost(data, int64(len(data)), opt); cerr == nil {
			work = 2 * c.WorkBytes
		}
		m, err := boundedDecode(t, "decode", work+int64(4*len(data))+1<<20, func() (*Image, error) {
			return Decode(data, opt, nil)
		})
		if Streamed(Sniff(data)) {
			head := data[:min(len(data), fuzzStreamHead)]
			if _, herr := DecodeHeader(head, opt); herr != nil {
				head = data // the header lies further on
			}
			sm, serr := boundedDecode(t, "streamed decode", work+StreamBufferBytes+1<<20, func() (*Image, error) {
				return DecodeStream(head, bytes.NewReader(data), int64(len(data)), opt, nil)
			})
			if (err == nil) != (serr == nil) || err == nil && !bytes.Equal(m.Pix, sm.Pix) {
				t.Fatalf("streamed decode (%v) disagrees with Decode (%v)", serr, err)
			}
		}
		if err != nil {
			return
		}
		if err := m.Check(); err != nil || m.C != 3 {
			t.Fatalf("inconsistent image: %v, C=%d", err, m.C)
		}
		if int64(m.W)*int64(m.H) > opt.MaxPixels {
			t.Fatalf("%dx%d is over the limit", m.W, m.H)
		}
		hd, err := DecodeHeader(data, opt)
		if err != nil || hd.W != m.W || hd.H != m.H {
			t.Fatalf("header %+v (%v) disagrees with the %dx%d result", hd, err, m.W, m.H)
		}
	})
}

// boundedDecode runs decode and fails t when it takes longer than fuzzDecodeTime or
// allocates more than allowed bytes, or returns both an image and an error.
func boundedDecode(t *testing.T, what string, allowed int64, decode func() (*Image, error)) (*Image, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	m, err := decode()
	took := time.Since(t0)
	runtime.ReadMemStats(&after)
	// A bound far above any honest decode of 1 MP, so only pathological inputs hit it.
	if took > fuzzDecodeTime {
		t.Fatalf("%s took %v", what, took)
	}
	if got := int64(after.TotalAlloc - before.TotalAlloc); got > allowed {
		t.Fatalf("%s allocated %d bytes, over the %d its cost allows", what, got, allowed)
	}
	if err != nil && m != nil {
		t.Fatalf("%s returned an image and an error", what)
	}
	return m, err
}
