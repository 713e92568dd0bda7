package cudastage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
)

// GPU tests of the PNG encoder (kernels/pngenc.cu): every file byte for byte
// against the model of docs/png-fast.md (pngenc_model_test.go), the lengths,
// and no byte written outside the files.

// pngGPURun encodes the batch on the GPU: the images uploaded, the files'
// buffer poisoned with v, the three passes run; it returns the files' buffer
// and the lengths (inside g.Do).
func pngGPURun(t testing.TB, g *GPU, k *Kernels, b *Batch, host []byte, dstSize uint64, v byte) ([]byte, []uint32) {
	t.Helper()
	table := make([]byte, TableBytes(b.Op, len(b.Src)))
	if err := b.EncodeTable(table); err != nil {
		t.Fatal(err)
	}
	n := len(b.Src)
	buf := Buffers{
		Src:     devMem(t, g, uint64(len(host))),
		Dst:     devMem(t, g, dstSize),
		Table:   devMem(t, g, uint64(len(table))),
		Scratch: devMem(t, g, b.ScratchBytes()),
		Lens:    devMem(t, g, 4*uint64(n)),
	}
	s, err := cu.StreamCreate(true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := errors.Join(
		cu.MemcpyHtoD(buf.Src, host),
		cu.MemcpyHtoD(buf.Table, table),
		cu.MemsetD8Async(buf.Dst, v, dstSize, s),
		cu.MemsetD8Async(buf.Scratch, v, b.ScratchBytes(), s),
		cu.MemsetD8Async(buf.Lens, v, 4*uint64(n), s),
	); err != nil {
		t.Fatal(err)
	}
	if err := k.Run(s, b, buf); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	out, lens := make([]byte, dstSize), make([]byte, 4*n)
	if err := errors.Join(cu.MemcpyDtoH(out, buf.Dst), cu.MemcpyDtoH(lens, buf.Lens)); err != nil {
		t.Fatal(err)
	}
	ls := make([]uint32, n)
	for i := range ls {
		ls[i] = binary.LittleEndian.Uint32(lens[4*i:])
	}
	return out, ls
}

// pngCheckGPU encodes images of the shapes and kind on the GPU (sources and
// files packed with the alignment: 1 gives odd offsets) under both poisons,
// and compares each file with the model.
func pngCheckGPU(t *testing.T, g *GPU, k *Kernels, shapes []pngShape, kinds []string, align int, seed uint64) {
	t.Helper()
	b, srcSize, dstSize := pngTestBatch(t, pngTestOp(), shapes, align)
	host := make([]byte, srcSize)
	want := make([][]byte, len(shapes))
	for i, s := range shapes {
		pix := pngTestImage(kinds[i%len(kinds)], s, seed+uint64(i))
		copy(host[b.Src[i].Off:], pix)
		want[i] = modelEncode(pix, s.w, s.h, s.c)
	}
	for _, v := range poisons {
		out, lens := pngGPURun(t, g, k, b, host, dstSize, v)
		written := make([]bool, len(out))
		for i, s := range shapes {
			name := fmt.Sprintf("image %d (%dx%dx%d %s, poison %#x)", i, s.w, s.h, s.c, kinds[i%len(kinds)], v)
			if int(lens[i]) != len(want[i]) {
				t.Errorf("%s: length %d, the model's %d", name, lens[i], len(want[i]))
				continue
			}
			off := int(b.Dst[i].Off)
			got := out[off : off+len(want[i])]
			if !bytes.Equal(got, want[i]) {
				at := 0
				for at < len(got) && got[at] == want[i][at] {
					at++
				}
				t.Errorf("%s: files differ from byte %d of %d: % x, the model's % x", name, at, len(got),
					got[at:min(at+16, len(got))], want[i][at:min(at+16, len(got))])
			}
			for j := off; j < off+len(want[i]); j++ {
				written[j] = true
			}
		}
		for j, w := range written {
			if !w && out[j] != v {
				t.Fatalf("poison %#x: byte %d outside every file was written (%#x)", v, j, out[j])
			}
		}
	}
}

// TestGPUPNGMatchesModel encodes every test shape in every kind: one batch
// of gray and RGB images at aligned offsets, one of mixed shapes at odd
// offsets (big ones first, so that small ones sit at the end of the grid),
// and a batch of a single 1×1 image.
func TestGPUPNGMatchesModel(t *testing.T) {
	g := requireGPU(t)
	k := loadTestKernels(t, g)
	mixed := slices.Clone(pngTestShapes)
	slices.Reverse(mixed)
	// Each subtest runs on its own goroutine, so each binds the GPU itself.
	check := func(t *testing.T, shapes []pngShape, kinds []string, align int, seed uint64) {
		if err := g.Do(func() error { pngCheckGPU(t, g, k, shapes, kinds, align, seed); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for ki, kind := range pngKinds {
		t.Run(kind, func(t *testing.T) { check(t, pngTestShapes, []string{kind}, 256, uint64(10*ki)) })
	}
	t.Run("mixed-odd-offsets", func(t *testing.T) { check(t, mixed, pngKinds, 1, 99) })
	t.Run("one-pixel", func(t *testing.T) { check(t, []pngShape{{1, 1, 1}}, []string{"random"}, 1, 7) })
}

// TestGPUPNGPhotos encodes batches of large smooth and random images (many
// blocks each; a 4000×3000 RGB image has 550), as the encoder meets them
// after a pixel chain. -short (the compute-sanitizer runs) leaves it out.
func TestGPUPNGPhotos(t *testing.T) {
	if testing.Short() {
		t.Skip("large images; TestGPUPNGMatchesModel covers every path")
	}
	g := requireGPU(t)
	k := loadTestKernels(t, g)
	shapes := []pngShape{{1920, 1080, 3}, {1080, 1920, 1}, {4000, 3000, 3}, {3, 3, 3}, {1920, 1080, 1}}
	err := g.Do(func() error {
		pngCheckGPU(t, g, k, shapes, []string{"smooth", "random", "smooth"}, 256, 5)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGPUPNGEncode measures the encoder's throughput in input bytes
// per second of kernel time (CUDA events, median of the runs after 3
// warm-ups) on 16 1080p images, smooth (photo-like) and random, RGB and gray.
// Run it on the GPU machine:
//
//	bash .gpu/run-tests.sh -test.run '^$' -test.bench BenchmarkGPUPNGEncode -test.benchtime 20x
func BenchmarkGPUPNGEncode(b *testing.B) {
	g := requireGPU(b)
	k := loadTestKernels(b, g)
	for _, c := range []struct {
		kind string
		ch   int
	}{{"smooth", 3}, {"smooth", 1}, {"random", 3}} {
		b.Run(fmt.Sprintf("%s-c%d", c.kind, c.ch), func(b *testing.B) {
			shapes := slices.Repeat([]pngShape{{benchW, benchH, c.ch}}, benchImages)
			bt, srcSize, dstSize := pngTestBatch(b, pngTestOp(), shapes, 256)
			host := make([]byte, srcSize)
			for i, s := range shapes {
				copy(host[bt.Src[i].Off:], pngTestImage(c.kind, s, uint64(i)))
			}
			table := make([]byte, TableBytes(bt.Op, len(shapes)))
			if err := bt.EncodeTable(table); err != nil {
				b.Fatal(err)
			}
			err := g.Do(func() error {
				buf := Buffers{
					Src: devMem(b, g, srcSize), Dst: devMem(b, g, dstSize), Table: devMem(b, g, uint64(len(table))),
					Scratch: devMem(b, g, bt.ScratchBytes()), Lens: devMem(b, g, 4*uint64(len(shapes))),
				}
				if err := errors.Join(cu.MemcpyHtoD(buf.Src, host), cu.MemcpyHtoD(buf.Table, table)); err != nil {
					return err
				}
				s, err := cu.StreamCreate(true)
				if err != nil {
					return err
				}
				defer s.Destroy()
				ms, err := medianMs(s, 3, b.N, func() error { return k.Run(s, bt, buf) })
				if err != nil {
					return err
				}
				lens := make([]byte, 4*len(shapes))
				if err := cu.MemcpyDtoH(lens, buf.Lens); err != nil {
					return err
				}
				var out uint64
				for i := range shapes {
					out += uint64(binary.LittleEndian.Uint32(lens[4*i:]))
				}
				in := float64(benchImages * benchW * benchH * c.ch)
				b.ReportMetric(ms*1e3, "us/batch")
				b.ReportMetric(in/(ms*1e6), "GB/s")
				b.ReportMetric(float64(out)/in, "ratio")
				b.Logf("%s C=%d: %.1f us per batch of %d, %.1f GB/s of input, files %.3f of the input", c.kind, c.ch, ms*1e3,
					benchImages, in/(ms*1e6), float64(out)/in)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
