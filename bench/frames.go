package bench

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"github.com/imgpipe/imgpipe/stages"
)

// Pool is the RGB frames a raw run cycles through, each W×H×3 bytes in Go memory.
type Pool struct {
	w, h   int
	frames [][]byte
	source string // what the frames are, for the header line
}

// image is frame i of the pool (cycling), as an image sharing the frame's bytes.
func (p *Pool) image(i int) *stages.Image {
	return &stages.Image{W: p.w, H: p.h, C: 3, Stride: p.w * 3, Pix: p.frames[i%len(p.frames)]}
}

// RandomPool makes n random w×h RGB frames (never zeros) from seed.
func RandomPool(w, h, n int, seed uint64) *Pool {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	p := &Pool{w: w, h: h, source: fmt.Sprintf("%d random frames, seed %d", n, seed)}
	for range n {
		b := make([]byte, w*h*3)
		i := 0
		for ; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
		}
		for ; i < len(b); i++ {
			b[i] = byte(rng.Uint32())
		}
		p.frames = append(p.frames, b)
	}
	return p
}

// LoadFrames reads a frames file of whole w×h RGB frames back to back, as
// bench/peers/common.py --out writes them, checking its size against maxBytes before
// reading anything.
func LoadFrames(path string, w, h int, maxBytes int64) (*Pool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	frame := int64(w) * int64(h) * 3
	n := fi.Size()
	switch {
	case n == 0:
		return nil, fmt.Errorf("%s is empty", path)
	case n%frame != 0:
		return nil, fmt.Errorf("%s: %d bytes is not a whole number of %dx%d RGB frames (%d bytes each); check --size", path, n, w, h, frame)
	case n > maxBytes:
		return nil, fmt.Errorf("%s: %d MiB, over --max-pool-mb %d", path, n>>20, maxBytes>>20)
	}
	p := &Pool{w: w, h: h}
	all := make([]byte, n)
	if _, err := io.ReadFull(f, all); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for off := int64(0); off < n; off += frame {
		p.frames = append(p.frames, all[off:off+frame:off+frame])
	}
	p.source = fmt.Sprintf("%d frames from %s", len(p.frames), path)
	return p, nil
}
