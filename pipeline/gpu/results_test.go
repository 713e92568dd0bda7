package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"math/rand"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/stages"
)

// mixedInputs are images of many shapes (1×1 and lines included) as PNG, JPEG and pixels
// (RGB and gray), plus inputs that fail: a corrupt file, one the source could not read.
func mixedInputs(t testing.TB, rng *rand.Rand, n int) []pipeline.Input {
	t.Helper()
	sizes := [][2]int{{1, 1}, {1, 7}, {9, 1}, {17, 9}, {33, 65}, {64, 48}, {5, 3}}
	var in []pipeline.Input
	for i := 0; i < n; i++ {
		s := sizes[i%len(sizes)]
		if i >= len(sizes) {
			s = [2]int{1 + rng.Intn(60), 1 + rng.Intn(40)}
		}
		name := fmt.Sprintf("d%d/img%03d", i%3, i)
		switch i % 5 {
		case 0, 1:
			in = append(in, pipeline.Input{Name: name + ".png", Data: stagestest.Encode(t, stagestest.ReadImage(rng, s[0], s[1], 3), "png")})
		case 2:
			in = append(in, pipeline.Input{Name: name + ".jpg", Data: stagestest.Encode(t, stagestest.ReadImage(rng, s[0], s[1], 3), "jpeg")})
		case 3:
			in = append(in, pipeline.Input{Name: name + ".rgb", Image: stagestest.ReadImage(rng, s[0], s[1], 3)})
		case 4:
			in = append(in, pipeline.Input{Name: name + ".gray", Image: stagestest.ReadImage(rng, s[0], s[1], 1)})
		}
	}
	in = append(in,
		pipeline.Input{Name: "corrupt.png", Data: stagestest.Encode(t, stagestest.ReadImage(rng, 20, 20, 3), "png")[:60]},
		pipeline.Input{Name: "unreadable.png", Err: errors.New("open: permission denied")},
	)
	rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
	return in
}

// pixelsOver counts the inputs whose pixels go to a slot's page-locked input (decoded on
// the host: images, PNGs) and need more than n bytes there: a run whose JPEGs the device
// decodes runs their chains on the CPU (hostInFor).
func pixelsOver(t *testing.T, inputs []pipeline.Input, n int) int {
	t.Helper()
	over := 0
	for _, in := range inputs {
		size := 0
		switch {
		case in.Image != nil:
			size = in.Image.W * in.Image.H * in.Image.C
		case strings.HasSuffix(in.Name, ".png"):
			c, _, err := image.DecodeConfig(bytes.NewReader(in.Data))
			if err != nil {
				continue // fails to decode
			}
			size = c.Width * c.Height * 3
		}
		if size > n {
			over++
		}
	}
	return over
}

// runBoth runs plan over inputs on the CPU and on gpu, and returns both collectors,
// reports and summaries.
func runBoth(t *testing.T, plan *pipeline.Plan, inputs []pipeline.Input, gpu *Options, workers int) (cpu, dev *pipeline.Collector, cpuRep, devRep string, devSum pipeline.Summary) {
	t.Helper()
	var rc, rd bytes.Buffer
	cpu, dev = pipeline.Collect(), pipeline.Collect()
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), cpu, pipeline.Options{Workers: workers, Report: &rc}); err != nil {
		t.Fatal(err)
	}
	devSum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), dev, pipeline.Options{Workers: workers, Report: &rd, Backend: gpu})
	if err != nil {
		t.Fatal(err)
	}
	return cpu, dev, rc.String(), rd.String(), devSum
}

// A GPU run gives the CPU run's results, bit for bit and in input order, for several
// chains over mixed sizes, formats and failures; an image too large for a slot runs on
// the CPU path; a sink that keeps images gets Go memory, not the slots' (which are reused
// many times over here, so aliasing would show).
func TestGPURunMatchesCPU(t *testing.T) {
	chains := []string{
		"decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png",
		"decode | boxblur radius=2 | save",
		"decode | histogram | save",
		"decode | transpose | grayscale",
		"decode | blur sigma=0.7 | boxblur radius=0 | histogram | transpose | save format=jpeg",
		"decode | histogram",
		// Shapes that change mid-segment, enlarging some inputs and shrinking others.
		"decode | resize width=40 height=40 fit=inside filter=lanczos3 | flip axis=v | histogram | save",
		"decode | grayscale | resize width=50 height=30 fit=cover filter=area | rotate angle=270 | crop x=2 y=3 width=11 | save",
	}
	rng := rand.New(rand.NewSource(7))
	inputs := mixedInputs(t, rng, 60)
	big := stagestest.ReadImage(rng, 120, 90, 3) // 32400 bytes: over the slots below
	inputs = append(inputs[:10], append([]pipeline.Input{{Name: "big.png", Data: stagestest.Encode(t, big, "png")}}, inputs[10:]...)...)
	for _, spec := range chains {
		t.Run(spec, func(t *testing.T) {
			base := runtime.NumGoroutine()
			plan, err := pipeline.Compile(mustSteps(t, spec))
			if err != nil {
				t.Fatal(err)
			}
			dev := fakeGPU(t, schedtest.FakeConfig{Name: "fake0", H2DRate: 2e9, D2HRate: 2e9})
			gpu := &Options{Device: dev, Streams: 2, Batch: 4, SlotBytes: 16 << 10, Linger: time.Millisecond}
			cpu, got, cpuRep, devRep, sum := runBoth(t, plan, inputs, gpu, 3)
			hostIn := gpu.SlotBytes // files go to the device only when it returns images
			if ops, err := plan.DeviceOps(); err == nil && slices.ContainsFunc(ops, func(op sched.Op) bool { return !op.Hist }) {
				hostIn = hostInFor(gpu.SlotBytes)
			}
			if len(got.Results) != len(inputs) || len(cpu.Results) != len(inputs) {
				t.Fatalf("%d GPU results, %d CPU results, %d inputs", len(got.Results), len(cpu.Results), len(inputs))
			}
			for i, r := range got.Results {
				c := cpu.Results[i]
				if r.Index != i || r.Input != inputs[i].Name {
					t.Fatalf("result %d is input %d (%s)", i, r.Index, r.Input)
				}
				if r.Status != c.Status || fmt.Sprint(r.Err) != fmt.Sprint(c.Err) || r.Output != c.Output {
					t.Errorf("%s: GPU %s %v %q, CPU %s %v %q", r.Input, r.Status, r.Err, r.Output, c.Status, c.Err, c.Output)
					continue
				}
				if !bytes.Equal(r.Encoded, c.Encoded) {
					t.Errorf("%s: encoded outputs differ", r.Input)
				}
				if (r.Image == nil) != (c.Image == nil) || (r.Image != nil && stagestest.Diff(r.Image, c.Image) != "") {
					t.Errorf("%s: images differ", r.Input)
				}
				if (r.Histogram == nil) != (c.Histogram == nil) || (r.Histogram != nil && *r.Histogram != *c.Histogram) {
					t.Errorf("%s: histograms differ", r.Input)
				}
			}
			// The lines agree but for the decoder: the fake device decodes JPEGs itself.
			cl, dl := reportLines(t, cpuRep), reportLines(t, devRep)
			noDecoder := regexp.MustCompile(`"decoder":"[^"]*",?`)
			if noDecoder.ReplaceAllString(strings.Join(cl[:len(cl)-1], "\n"), "") != noDecoder.ReplaceAllString(strings.Join(dl[:len(dl)-1], "\n"), "") {
				t.Errorf("report lines differ:\nCPU:\n%s\nGPU:\n%s", cpuRep, devRep)
			}
			if sum.Device != "fake0" || sum.Streams != 2 || sum.Batch != 4 || sum.Batches < int64(len(inputs)/4) ||
				sum.CPUFallback != pixelsOver(t, inputs, hostIn) || sum.OK != len(inputs)-2 || sum.Failed != 2 || sum.Overlap <= 0 {
				t.Errorf("summary %+v", sum)
			}
			if !strings.Contains(dl[len(dl)-1], `"overlap_efficiency":`) || !strings.Contains(dl[len(dl)-1], `"h2d_s":`) {
				t.Errorf("summary line lacks the GPU figures: %s", dl[len(dl)-1])
			}
			// The slots' memory: 4 slots of 16 KiB in (and as much out), histograms and tables.
			if sum.PinnedReservedBytes < 4*16<<10 || sum.PinnedPeakBytes != sum.PinnedReservedBytes ||
				sum.DeviceReservedBytes < sum.PinnedReservedBytes || sum.DevicePeakBytes != sum.DeviceReservedBytes || sum.PoolHits != 0 {
				t.Errorf("memory figures: pinned %d (peak %d), device %d (peak %d), %d hits", sum.PinnedReservedBytes,
					sum.PinnedPeakBytes, sum.DeviceReservedBytes, sum.DevicePeakBytes, sum.PoolHits)
			}
			for _, k := range []string{`"pinned_reserved_bytes":`, `"pinned_peak_bytes":`, `"device_reserved_bytes":`, `"device_peak_bytes":`} {
				if !strings.Contains(dl[len(dl)-1], k) {
					t.Errorf("summary line lacks %s: %s", k, dl[len(dl)-1])
				}
			}
			checkNoLeaks(t, base)
			if l := dev.Live(); l != (schedtest.FakeLive{}) {
				t.Errorf("device memory left: %+v", l)
			}
		})
	}
}

// flakyStages is the builtin registry with "flaky" as the source: it takes its pixels from
// the allocator (a device slot) and then fails ("X..."), panics ("P...") or succeeds.
// Failing after the allocation is what a decoder bug would do; it must drop only that image
// from its batch.
func flakyStages(t testing.TB) *pipeline.Registry {
	t.Helper()
	flaky := &pipeline.StageDef{Name: "flaky", Kind: pipeline.SourceKind, Help: "decodes raw 8x8 RGB, sometimes fails late",
		NewDecoder: func(pipeline.Params) (*pipeline.Decoder, error) {
			return &pipeline.Decoder{MaxPixels: 1 << 20, Decode: func(data []byte, alloc stages.Alloc) (*stages.Image, pipeline.Decoded, error) {
				m, err := alloc(8, 8, 3)
				if err != nil {
					return nil, pipeline.Decoded{}, err
				}
				copy(m.Pix, data[1:])
				switch data[0] {
				case 'X':
					return nil, pipeline.Decoded{}, errors.New("late failure")
				case 'P':
					panic("decoder bug")
				}
				return m, pipeline.Decoded{Decoder: "raw"}, nil
			}}, nil
		}}
	r, err := pipeline.NewRegistry(flaky, grayscaleDef, blurDef, transposeDef, histogramDef, saveDef)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestGPURunDecodeErrorsDoNotPoisonTheBatch(t *testing.T) {
	base := runtime.NumGoroutine()
	plan := compileWith(t, flakyStages(t), "flaky | grayscale | histogram")
	rng := rand.New(rand.NewSource(3))
	var inputs []pipeline.Input
	want := map[int]*stages.Image{}
	for i := 0; i < 24; i++ {
		data := make([]byte, 1+8*8*3)
		rng.Read(data[1:])
		switch i % 6 {
		case 2:
			data[0] = 'X'
		case 4:
			data[0] = 'P'
		default:
			data[0] = 'o'
			src := &stages.Image{W: 8, H: 8, C: 3, Stride: 24, Pix: data[1:]}
			g := stages.NewImage(8, 8, 1)
			stages.Grayscale(g, src)
			want[i] = g
		}
		inputs = append(inputs, pipeline.Input{Name: fmt.Sprintf("%02d", i), Data: data})
	}
	dev := fakeGPU(t, schedtest.FakeConfig{})
	sink := pipeline.Collect()
	// One batch holds every image: the late failures are in it with the good ones.
	sum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), sink, pipeline.Options{Workers: 4,
		Backend: &Options{Device: dev, Streams: 1, Batch: 32, SlotBytes: 32 << 10, Linger: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK != 16 || sum.Failed != 8 {
		t.Errorf("summary %+v", sum)
	}
	for i, r := range sink.Results {
		switch i % 6 {
		case 2:
			if r.Status != pipeline.StatusFailed || r.Err.Error() != "flaky: late failure" {
				t.Errorf("%d: %s %v", i, r.Status, r.Err)
			}
		case 4:
			if r.Status != pipeline.StatusFailed || r.Err.Error() != "flaky: panic: decoder bug" {
				t.Errorf("%d: %s %v", i, r.Status, r.Err)
			}
		default:
			if r.Status != pipeline.StatusOK || stagestest.Diff(r.Image, want[i]) != "" {
				t.Errorf("%d: %s %v, right pixels %v", i, r.Status, r.Err, r.Status == pipeline.StatusOK && stagestest.Diff(r.Image, want[i]) == "")
			}
		}
	}
	checkNoLeaks(t, base)
}

// Many small inputs through few small slots: back-pressure, slot reuse and the reorder
// buffer keep input order, and every image is right.
func TestGPURunManyInputsInOrder(t *testing.T) {
	plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale | transpose | histogram"))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(11))
	const n = 400
	var inputs []pipeline.Input
	for i := 0; i < n; i++ {
		inputs = append(inputs, pipeline.Input{Name: fmt.Sprint(i), Image: stagestest.ReadImage(rng, 1+rng.Intn(30), 1+rng.Intn(30), 3)})
	}
	dev := fakeGPU(t, schedtest.FakeConfig{CopyLatency: 50 * time.Microsecond, KernelLatency: 50 * time.Microsecond})
	var order []int
	sink := pipeline.Collect()
	sum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), sink, pipeline.Options{Workers: 4, Window: 1,
		Progress: func(r *pipeline.Result) { order = append(order, r.Index) },
		Backend:  &Options{Device: dev, Streams: 3, Batch: 5, Slots: 3, SlotBytes: 8 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK != n {
		t.Fatalf("summary %+v", sum)
	}
	for i, r := range sink.Results {
		m := inputs[i].Image
		g := stages.NewImage(m.W, m.H, 1)
		stages.Grayscale(g, m)
		tr := stages.NewImage(m.H, m.W, 1)
		stages.Transpose(tr, g)
		var h [256]uint64
		stages.Histogram(&h, tr)
		if order[i] != i || r.Index != i || stagestest.Diff(r.Image, tr) != "" || *r.Histogram != h || r.Width != m.W || r.Height != m.H {
			t.Fatalf("result %d (index %d, progress %d) is wrong", i, r.Index, order[i])
		}
	}
}

// A chain with a stage that has no kernel runs wholly on the CPU, saying so once.
func TestGPURunFallsBackToCPU(t *testing.T) {
	r := deviceTestRegistry(t)
	rng := rand.New(rand.NewSource(2))
	inputs := []pipeline.Input{{Name: "a", Image: stagestest.ReadImage(rng, 10, 7, 3)}, {Name: "b", Image: stagestest.ReadImage(rng, 3, 9, 3)}}
	// backend=go: auto would add its own notice where libjpeg-turbo is missing.
	for _, spec := range []string{"decode backend=go | grayscale | cpuonly | histogram", "decode backend=go | save"} {
		plan := compileWith(t, r, spec)
		var notices []string
		dev := fakeGPU(t, schedtest.FakeConfig{Name: "fake9"})
		sink := pipeline.Collect()
		sum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), sink, pipeline.Options{
			Notice:  func(m string) { notices = append(notices, m) },
			Backend: &Options{Device: dev}})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Device != "cpu" || sum.Streams != 0 || sum.OK != 2 {
			t.Errorf("%s: summary %+v", spec, sum)
		}
		if len(notices) != 1 || !strings.Contains(notices[0], "cannot run on fake9") || !strings.Contains(notices[0], "running it on the CPU") {
			t.Errorf("%s: notices %q", spec, notices)
		}
		if calls := dev.Calls(); len(calls) != 0 {
			t.Errorf("%s: the device was used: %v", spec, calls)
		}
	}
}

// A GPU run's trace has a track per stream with H2D, each kernel and D2H, and tracks for
// the decode and save workers, on one time axis.
func TestGPURunTrace(t *testing.T) {
	plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale | blur sigma=1.5 | transpose | histogram | save"))
	if err != nil {
		t.Fatal(err)
	}
	dev := fakeGPU(t, schedtest.FakeConfig{Name: "fake"})
	tr := sched.NewTrace("imgpipe", 0)
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(slowInputs(t, 40)...), pipeline.Collect(),
		pipeline.Options{Workers: 2, Trace: tr, Backend: &Options{Device: dev, Streams: 2, Batch: 4, SlotBytes: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	events := schedtest.TraceEvents(t, tr)
	tracks := map[int]string{}
	spans := map[string]map[string]int{}
	for _, e := range events {
		if e.Ph == "M" && e.Name == "thread_name" {
			tracks[e.Tid] = e.Args["name"].(string)
		}
	}
	for _, e := range events {
		if e.Ph != "X" {
			continue
		}
		tr := tracks[e.Tid]
		kind := strings.TrimRight(tr, "0123456789")
		if spans[kind] == nil {
			spans[kind] = map[string]int{}
		}
		spans[kind][e.Name]++
	}
	want := map[string][]string{
		"fake stream ":   {"H2D", "grayscale", "blur sigma=1.5", "transpose", "histogram", "D2H"},
		"decode worker ": {"decode"},
		"save worker ":   {"save"},
	}
	for kind, names := range want {
		for _, n := range names {
			if spans[kind][n] == 0 {
				t.Errorf("no %q span on a %q track; spans: %v", n, kind, spans)
			}
		}
	}
	if spans["decode worker "]["decode"] != 40 || spans["save worker "]["save"] != 40 {
		t.Errorf("decode/save spans: %v", spans)
	}
	if spans["fake stream "]["H2D"] != spans["fake stream "]["D2H"] || spans["fake stream "]["H2D"] < 10 {
		t.Errorf("stream spans: %v", spans["fake stream "])
	}
}
