package pipeline

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
)

// TestPNGFastBound checks the device encoding op of save compression=fast: its bytes are
// the CPU encoder's, and its Bound holds for incompressible images of edge sizes.
func TestPNGFastBound(t *testing.T) {
	op := pngFastOp()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sz := range [][3]int{{1, 1, 1}, {1, 1, 3}, {1, 300, 3}, {300, 1, 1}, {257, 129, 3}, {600, 400, 1}} {
		m := stages.NewImage(sz[0], sz[1], sz[2])
		for i := range m.Pix {
			m.Pix[i] = byte(rng.Uint32())
		}
		dst := make([]byte, op.Encode.Bound(m.Shape()))
		n := op.Encode.CPU(dst, m)
		var want bytes.Buffer
		if err := stages.Encode(&want, m, stages.SaveOptions{Format: "png", Compression: stages.PNGFast}); err != nil {
			t.Fatal(err)
		}
		if n < 0 || !bytes.Equal(dst[:n], want.Bytes()) {
			t.Errorf("%v: %d bytes in a bound of %d, want the CPU's %d", m.Shape(), n, len(dst), want.Len())
		}
	}
}
