package cudastage

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// benchImages and benchW×benchH are the batch the kernel benchmark uses:
// 16 random 1080p frames, the executor's typical batch.
const (
	benchImages = 16
	benchW      = 1920
	benchH      = 1080
)

// medianMs times f on stream s with CUDA events: reps runs after warm
// warm-up runs, and returns the median in milliseconds.
func medianMs(s cu.Stream, warm, reps int, f func() error) (float64, error) {
	start, err := cu.EventCreate(true)
	if err != nil {
		return 0, err
	}
	defer start.Destroy()
	end, err := cu.EventCreate(true)
	if err != nil {
		return 0, err
	}
	defer end.Destroy()
	for range warm {
		if err := f(); err != nil {
			return 0, err
		}
	}
	ms := make([]float64, 0, reps)
	for range reps {
		if err := errors.Join(start.Record(s), f(), end.Record(s), end.Synchronize()); err != nil {
			return 0, err
		}
		t, err := cu.ElapsedTime(start, end)
		if err != nil {
			return 0, err
		}
		ms = append(ms, float64(t))
	}
	slices.Sort(ms)
	return ms[len(ms)/2], nil
}

// benchCase is one kernel configuration of the benchmark and the bytes it
// must move at the least: every source byte read once and every destination
// byte written once (for the blurs also the uint16 intermediate, written by
// the horizontal pass and read by the vertical one).
type benchCase struct {
	name  string
	op    sched.Op
	rgb   bool    // source is the RGB batch, else the gray one
	bytes float64 // per run
}

// BenchmarkGPUKernels measures each kernel's effective device-memory
// bandwidth on a batch of 16 random 1080p images, (bytes read + written) /
// kernel time from CUDA events (median of the runs after 3 warm-ups), and
// compares it with a device-to-device copy of the RGB batch measured in the
// same run (read + write bytes, same timing). Run it on the GPU machine:
//
//	bash .gpu/run-tests.sh -test.run '^$' -test.bench BenchmarkGPUKernels -test.benchtime 50x
func BenchmarkGPUKernels(b *testing.B) {
	g := requireGPU(b)
	const P = float64(benchImages * benchW * benchH) // pixels per batch
	cases := []benchCase{
		{"grayscale-rgb", opOf("grayscale"), true, 4 * P},
		{"histogram-gray", opOf("histogram"), false, P},
		{"histogram-rgb", opOf("histogram"), true, 3 * P},
		{"transpose-gray", opOf("transpose"), false, 2 * P},
		{"transpose-rgb", opOf("transpose"), true, 6 * P},
		{"blur1.5-gray", opOf("blur sigma=1.5"), false, 6 * P},
		{"blur1.5-rgb", opOf("blur sigma=1.5"), true, 18 * P},
		{"blur4-gray", opOf("blur sigma=4"), false, 6 * P},
		{"blur32-gray", opOf("blur sigma=32"), false, 6 * P},
		{"boxblur1-gray", opOf("boxblur radius=1"), false, 6 * P},
		{"boxblur15-gray", opOf("boxblur radius=15"), false, 6 * P},
		// resize: 256×144 thumbnails (the output is 2% of the input), half
		// size, and twice the size.
		{"thumb-lanczos3-rgb", opOf("resize width=256 height=256 fit=inside filter=lanczos3"), true, 3 * P},
		{"thumb-area-rgb", opOf("resize width=256 height=256 fit=inside filter=area"), true, 3 * P},
		{"half-linear-rgb", opOf("resize width=960 filter=linear"), true, 3 * P * 5 / 4},
		{"double-lanczos3-gray", opOf("resize width=3840 filter=lanczos3"), false, 5 * P},
	}
	var (
		k          *Kernels
		stream     cu.Stream
		rgb, gray  cu.DevicePtr
		rgbSize    uint64
		dst, tmp   cu.DevicePtr
		batches    []*Batch
		tables     []cu.DevicePtr
		copyGBps   float64
		rgbImgs    []BatchImage
		grayImgs   []BatchImage
		graySize   uint64
		rng        = rand.New(rand.NewPCG(1, 2))
		maxDst     uint64
		maxScratch uint64
	)
	err := g.Do(func() error {
		var err error
		rgbImgs, rgbSize, err = Pack(slices.Repeat([]BatchImage{{W: benchW, H: benchH, C: 3}}, benchImages), 256)
		if err != nil {
			return err
		}
		grayImgs, graySize, err = Pack(slices.Repeat([]BatchImage{{W: benchW, H: benchH, C: 1}}, benchImages), 256)
		if err != nil {
			return err
		}
		for _, c := range cases {
			src := grayImgs
			if c.rgb {
				src = rgbImgs
			}
			bt := &Batch{Op: c.op, Src: src}
			var n uint64
			if bt.Dst, n, err = Outputs(c.op, src, 256); err != nil {
				return err
			}
			maxDst, maxScratch = max(maxDst, n), max(maxScratch, bt.ScratchBytes())
			table := make([]byte, TableBytes(c.op, len(src)))
			if err := bt.EncodeTable(table); err != nil {
				return err
			}
			tp := devMem(b, g, uint64(len(table)))
			if err := cu.MemcpyHtoD(tp, table); err != nil {
				return err
			}
			batches, tables = append(batches, bt), append(tables, tp)
		}
		k = testKernels(b)
		rgb, gray = devMem(b, g, rgbSize), devMem(b, g, graySize)
		dst, tmp = devMem(b, g, maxDst), devMem(b, g, maxScratch)
		for _, buf := range []struct {
			p cu.DevicePtr
			n uint64
		}{{rgb, rgbSize}, {gray, graySize}} {
			host := make([]byte, buf.n)
			randomImages(host, nil, rng)
			if err := cu.MemcpyHtoD(buf.p, host); err != nil {
				return err
			}
		}
		if stream, err = cu.StreamCreate(true); err != nil {
			return err
		}
		ms, err := medianMs(stream, 3, 21, func() error { return cu.MemcpyDtoDAsync(dst, rgb, rgbSize, stream) })
		if err != nil {
			return err
		}
		copyGBps = 2 * float64(rgbSize) / (ms * 1e6)
		name, _ := g.Device().Name()
		b.Logf("%s: DtoD copy of %d MB: %.3f ms, %.0f GB/s (read + write)", name, rgbSize>>20, ms, copyGBps)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		g.Do(func() error { return errors.Join(stream.Destroy(), k.Unload()) })
	})

	b.Run("copy-dtod", func(b *testing.B) {
		err := g.Do(func() error {
			ms, err := medianMs(stream, 3, b.N, func() error { return cu.MemcpyDtoDAsync(dst, rgb, rgbSize, stream) })
			if err != nil {
				return err
			}
			gbps := 2 * float64(rgbSize) / (ms * 1e6)
			b.ReportMetric(ms*1e3, "us/batch")
			b.ReportMetric(gbps, "GB/s")
			b.ReportMetric(100*gbps/copyGBps, "%copy")
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	})
	for i, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			src := gray
			if c.rgb {
				src = rgb
			}
			buf := Buffers{Src: src, Dst: dst, Scratch: tmp, Table: tables[i]}
			err := g.Do(func() error {
				ms, err := medianMs(stream, 3, b.N, func() error { return k.Run(stream, batches[i], buf) })
				if err != nil {
					return err
				}
				gbps := c.bytes / (ms * 1e6)
				b.ReportMetric(ms*1e3, "us/batch")
				b.ReportMetric(gbps, "GB/s")
				b.ReportMetric(100*gbps/copyGBps, "%copy")
				b.Logf("%-20s %9.1f us %8.0f GB/s %6.1f%% of the copy's %.0f GB/s", c.name, ms*1e3, gbps, 100*gbps/copyGBps, copyGBps)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
