package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/cutest"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// These tests run `imgpipe run --device cuda` on the real GPU: they skip without one, and
// fail under IMGPIPE_REQUIRE_GPU=1 (set by gpu-bundle's run-tests.sh). They use GPU 0 (the
// CLI's), so IMGPIPE_GPU must be unset or 0.

// gpuChains are the chains compared with the CPU: every kernel, both channel counts
// (grayscale first or last), a chain without an image-making op, JPEG output. They decode
// with Go's decoder on both sides; TestGPUDecodeThenExact covers the device's decoder.
var gpuChains = []string{
	"decode backend=go | grayscale | blur sigma=1.5 | transpose | histogram | save format=png",
	"decode backend=go | blur sigma=0.8 | boxblur radius=2 | transpose | save",
	"decode backend=go | transpose | boxblur radius=15 | grayscale | histogram | save format=jpeg quality=90",
	"decode backend=go | histogram | save",
	"decode backend=go | blur sigma=6 | save",
	// The geometry stages, shapes changing mid-segment (shrinking and enlarging).
	"decode backend=go | resize width=256 height=256 fit=inside filter=lanczos3 | save format=jpeg",
	"decode backend=go | flip axis=h | resize width=800 height=600 fit=cover filter=linear | rotate angle=90 | grayscale | crop width=301 height=99 gravity=center | histogram | save",
	"decode backend=go | resize height=700 filter=area | flip axis=v | rotate angle=270 | save",
}

func requireGPU0(t *testing.T) {
	t.Helper()
	if cutest.Require(t) != 0 {
		t.Skip("the CLI runs on GPU 0; IMGPIPE_GPU picks another")
	}
}

// Outputs and report histograms of --device cuda are byte-identical to --device cpu, on a
// folder of mixed sizes (1×1 up to 4000×3000, odd ones) and formats, for several chains,
// stream counts and batch sizes, and with a page-locked budget so small that the largest
// image runs on the CPU path.
func TestGPURunMatchesCPU(t *testing.T) {
	requireGPU0(t)
	in := deviceFolder(t, [2]int{1920, 1080}, [2]int{1080, 1920}, [2]int{1279, 719}, [2]int{4000, 3000}, [2]int{2, 5000})
	for _, spec := range gpuChains {
		t.Run(spec, func(t *testing.T) {
			cpuSum, sum, stderr := compareDevices(t, in, spec, "cuda", "--gpu-wait")
			t.Logf("%s", strings.TrimSpace(stderr))
			if !strings.HasPrefix(sum.Device, "GPU 0 (") || sum.Streams != pipeline.DefaultStreams || sum.Batch != pipeline.DefaultBatch ||
				sum.Batches == 0 || sum.Overlap <= 0 || sum.H2DSeconds <= 0 || sum.KernelSeconds <= 0 ||
				sum.OK != cpuSum.OK || sum.Failed != cpuSum.Failed || sum.CPUFallback != 0 {
				t.Errorf("summary %+v", sum)
			}
			if !strings.Contains(stderr, "overlap efficiency") {
				t.Errorf("stderr lacks the GPU figures:\n%s", stderr)
			}
		})
	}
	t.Run("streams 4 batch 3", func(t *testing.T) {
		_, sum, _ := compareDevices(t, in, gpuChains[0], "cuda", "--gpu-wait", "--streams", "4", "--batch", "3")
		if sum.Streams != 4 || sum.Batch != 3 {
			t.Errorf("summary %+v", sum)
		}
	})
	t.Run("streams 1 batch 1", func(t *testing.T) {
		compareDevices(t, in, gpuChains[1], "cuda", "--gpu-wait", "--streams", "1", "--batch", "1")
	})
	t.Run("pinned-mb 64", func(t *testing.T) {
		// 64 MiB over 4 slots of input and output: 8 MiB slots; 4000×3000 RGB is 36 MB.
		_, sum, _ := compareDevices(t, in, gpuChains[0], "cuda", "--gpu-wait", "--pinned-mb", "64")
		if sum.CPUFallback != 1 {
			t.Errorf("%d images on the CPU path, want 1 (4000x3000): %+v", sum.CPUFallback, sum)
		}
	})
	t.Run("auto", func(t *testing.T) {
		// The workers take every input at once: none is left that the GPU could take
		// sooner, so auto does not start it.
		_, sum, stderr := compareDevices(t, in, gpuChains[2], "auto", "--workers", "64")
		if sum.Device != "cpu" || !sum.GPUNotStarted || strings.Contains(stderr, "no usable GPU") {
			t.Errorf("auto started the GPU for a run the CPU finishes alone: %+v\n%s", sum, stderr)
		}
		// --gpu-wait makes auto use the GPU whatever the run.
		_, sum, stderr = compareDevices(t, in, gpuChains[2], "auto", "--gpu-wait")
		if !strings.HasPrefix(sum.Device, "GPU 0 (") || sum.Batches == 0 || sum.GPUNotStarted || strings.Contains(stderr, "no usable GPU") {
			t.Errorf("auto --gpu-wait did not use the GPU: %+v\n%s", sum, stderr)
		}
	})
}

// On photographs (the sample photos, and those of IMGPIPE_TEST_PHOTOS when set) the device's
// PNG encoder and the CPU's write the same readable files, as saved and enlarged: the CPU's
// packer once corrupted a block that started with long codes, which only real photos showed.
func TestGPURunMatchesCPUOnPhotos(t *testing.T) {
	requireGPU0(t)
	in := t.TempDir()
	copyTree(t, filepath.Join("..", "..", "samples", "images"), filepath.Join(in, "samples"))
	if dir := os.Getenv("IMGPIPE_TEST_PHOTOS"); dir != "" {
		copyTree(t, dir, filepath.Join(in, "more"))
	}
	for _, spec := range []string{
		"decode backend=go | save",
		"decode backend=go | resize width=2000 height=1500 filter=lanczos3 | save",
	} {
		t.Run(spec, func(t *testing.T) { compareDevices(t, in, spec, "cuda") })
	}
}

// --trace on the GPU: valid JSON with a track per stream holding H2D, each kernel and D2H
// (timed by CUDA events), and tracks for the decode and save workers.
func TestGPUTrace(t *testing.T) {
	requireGPU0(t)
	in := t.TempDir()
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 48; i++ {
		write(t, in, fmt.Sprintf("%02d.jpg", i), jpegBytes(t, photo(rng, 640, 360)))
	}
	trace := filepath.Join(t.TempDir(), "trace.json")
	code, _, stderr := cli(t, "run", "-i", in, "-o", filepath.Join(t.TempDir(), "out"), "-p", gpuChains[0],
		"--device", "cuda", "--gpu-wait", "--batch", "8", "--trace", trace)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	checkTrace(t, data, "GPU 0 (", "H2D", "grayscale", "blur sigma=1.5", "transpose", "histogram", "D2H")
	streams := map[string]bool{}
	var file struct {
		TraceEvents []struct {
			Name, Ph string
			Args     map[string]any
		}
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	for _, e := range file.TraceEvents {
		if name, _ := e.Args["name"].(string); e.Ph == "M" && strings.Contains(name, " stream ") {
			streams[name] = true
		}
	}
	if len(streams) != pipeline.DefaultStreams {
		t.Errorf("stream tracks %v, want %d", streams, pipeline.DefaultStreams)
	}
}

// An interrupt during a GPU run abandons the batches on the device: exit 130, the report
// lists exactly the outputs written (inputs in flight are not done, never failed), nothing
// is partial, and the GPU is usable afterwards: --resume redoes exactly what was not done.
// It is kept small and hook-driven (cancelled after the 6th result) so that it takes
// seconds: 48 inputs with batch 4, 2 streams and 2 workers keep at most 20 in flight, so
// most inputs are never started whatever the GPU's speed.
func TestGPURunInterrupted(t *testing.T) {
	requireGPU0(t)
	const n = 48
	in := t.TempDir()
	rng := rand.New(rand.NewSource(4))
	img := pngBytes(t, photo(rng, 320, 240))
	for i := 0; i < n; i++ {
		write(t, in, fmt.Sprintf("d%d/%03d.png", i%3, i), img)
	}
	out := filepath.Join(t.TempDir(), "out")
	const spec = "decode | blur sigma=2 | save"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Interrupted at an exact point (after 6 results), not by a timer racing the run.
	seen := 0
	resultHook = func(*pipeline.Result) {
		if seen++; seen == 6 {
			cancel()
		}
	}
	defer func() { resultHook = nil }()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"run", "-i", in, "-o", out, "-p", spec, "--device", "cuda",
		"--batch", "4", "--streams", "2", "--workers", "2"}, &stdout, &stderr)
	if code != exitInterrupted {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	lines, sum := readReport(t, filepath.Join(out, folderrun.ReportName))
	written := files(t, out) // fails on temporary files left
	delete(written, folderrun.ReportName)
	if !sum.Interrupted || len(written) != len(lines) || sum.OK != len(lines) || sum.OK < 6 || sum.OK >= n || sum.Failed != 0 {
		t.Errorf("summary %+v, %d outputs, %d lines", sum, len(written), len(lines))
	}
	for _, l := range lines {
		if _, ok := written[l.Output]; !ok || l.Status != pipeline.StatusOK {
			t.Errorf("%s: %s, written %v", l.Input, l.Status, ok)
		}
	}
	resultHook = nil
	code, _, errOut := cli(t, "run", "-i", in, "-o", out, "-p", spec, "--device", "cuda", "--resume", "-q")
	_, sum2 := readReport(t, filepath.Join(out, folderrun.ReportName))
	if code != exitOK || sum2.Skipped != sum.OK || sum2.OK != n-sum.OK || sum2.Failed != 0 {
		t.Errorf("resume: exit %d, %+v\n%s", code, sum2, errOut)
	}
}

// `imgpipe devices` lists the GPU, as text and as JSON.
func TestGPUDevices(t *testing.T) {
	requireGPU0(t)
	code, stdout, _ := cli(t, "devices")
	t.Logf("%s", stdout)
	if code != exitOK || !strings.HasPrefix(stdout, "GPU 0: ") || !strings.Contains(stdout, "compute capability") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	code, stdout, _ = cli(t, "devices", "--json")
	var got struct {
		Devices []cudastage.DeviceInfo `json:"devices"`
		Error   string                 `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitOK || len(got.Devices) == 0 || got.Error != "" {
		t.Fatalf("exit %d (%v):\n%s", code, err, stdout)
	}
	d := got.Devices[0]
	if d.Name == "" || d.Major < 7 || d.SMs == 0 || d.TotalMemory == 0 || d.AsyncEngines == 0 || d.CUDAVersion == "" {
		t.Errorf("device 0: %+v", d)
	}
}

// The exactness contract of device decoding: nvJPEG's pixels differ slightly from the CPU
// decoders', but everything after decode is bit-exact. The test takes the device's decoded
// pixels (decode, two horizontal flips, saved losslessly by the device's PNG encoder), runs
// the reference chain on them on the CPU, and compares with the chain run wholly on the
// device from the JPEG files: outputs and histograms must be identical. It also states the
// decode difference against the CPU's default decoder. IMGPIPE_TEST_PHOTOS adds a folder of
// real photos.
func TestGPUDecodeThenExact(t *testing.T) {
	requireGPU0(t)
	// The decode bound is documented for photographs: the repository's sample photos, and
	// those of IMGPIPE_TEST_PHOTOS when set. The synthetic files only have to decode.
	in := deviceFolder(t, [2]int{1920, 1080}, [2]int{1279, 719}, [2]int{3, 4000})
	copyTree(t, filepath.Join("..", "..", "samples", "images"), filepath.Join(in, "photos", "samples"))
	if dir := os.Getenv("IMGPIPE_TEST_PHOTOS"); dir != "" {
		copyTree(t, dir, filepath.Join(in, "photos", "more"))
	}
	const ref = "grayscale | blur sigma=1.5 | transpose | histogram | save"
	tmp := t.TempDir()
	dec, gpuOut, cpuOut := filepath.Join(tmp, "decoded"), filepath.Join(tmp, "gpu"), filepath.Join(tmp, "cpu")
	mustRun := func(args ...string) {
		t.Helper()
		if code, _, stderr := cli(t, args...); code != exitOK && code != exitSomeFailed {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	mustRun("run", "-i", in, "-o", dec, "-p", "decode backend=nvjpeg | flip axis=h | flip axis=h | save", "--device", "cuda", "-q")
	mustRun("run", "-i", in, "-o", gpuOut, "-p", "decode backend=nvjpeg | "+ref, "--device", "cuda", "-q")
	mustRun("run", "-i", dec, "-o", cpuOut, "-p", "decode backend=go | "+ref, "--device", "cpu", "-q")
	decLines, _ := readReport(t, filepath.Join(dec, folderrun.ReportName))
	gpuLines, _ := readReport(t, filepath.Join(gpuOut, folderrun.ReportName))
	cpuLines, _ := readReport(t, filepath.Join(cpuOut, folderrun.ReportName))
	cpuByInput := map[string]pipeline.ReportLine{}
	for _, l := range cpuLines {
		cpuByInput[l.Input] = l
	}
	var n, photos, diffs int
	var sum, count float64
	maxDiff := 0
	for i, l := range gpuLines {
		if l.Status != "ok" || !strings.HasPrefix(l.Decoder, "nvjpeg") {
			continue
		}
		n++
		if decLines[i].Input != l.Input || decLines[i].Decoder != l.Decoder {
			t.Fatalf("%s: decoded by %q in the first run, %q in the second", l.Input, decLines[i].Decoder, l.Decoder)
		}
		c, ok := cpuByInput[decLines[i].Output]
		if !ok || c.Status != "ok" {
			t.Errorf("%s: no CPU result for %s", l.Input, decLines[i].Output)
			continue
		}
		a, _ := os.ReadFile(filepath.Join(gpuOut, l.Output))
		b, _ := os.ReadFile(filepath.Join(cpuOut, c.Output))
		if len(a) == 0 || !bytes.Equal(a, b) || fmt.Sprint(l.Histogram) != fmt.Sprint(c.Histogram) {
			t.Errorf("%s (%s): the device's output differs from the CPU chain on the device's decoded pixels", l.Input, l.Decoder)
			diffs++
		}
		// The decode difference against the CPU's default decoder.
		gpuPix, err := decodeFile(filepath.Join(dec, decLines[i].Output), "go")
		if err != nil {
			t.Fatal(err)
		}
		cpuPix, err := decodeFile(filepath.Join(in, l.Input), "auto")
		if err != nil {
			t.Fatal(err)
		}
		if len(gpuPix.Pix) != len(cpuPix.Pix) {
			t.Fatalf("%s: %v decoded on the device, %v on the CPU", l.Input, gpuPix.Shape(), cpuPix.Shape())
		}
		if !strings.HasPrefix(l.Input, "photos/") {
			continue
		}
		photos++
		for j := range gpuPix.Pix {
			d := int(gpuPix.Pix[j]) - int(cpuPix.Pix[j])
			d = max(d, -d)
			sum += float64(d)
			maxDiff = max(maxDiff, d)
		}
		count += float64(len(gpuPix.Pix))
	}
	if photos == 0 {
		t.Fatal("no photo was decoded on the device")
	}
	mean := sum / count
	t.Logf("%d JPEGs decoded by nvJPEG; on the %d photos, against the CPU's decoder (%s): mean |diff| %.3f, max %d; %d outputs differ from the CPU chain on the same pixels",
		n, photos, cpuJPEGName(), mean, maxDiff, diffs)
	// Measured on an H100 with 12 real photos against libjpeg-turbo: mean 0.123, max 62.
	if mean > 1 || maxDiff > 96 {
		t.Errorf("decode difference mean %.3f max %d: over the documented bound (mean ≤ 1, max ≤ 96)", mean, maxDiff)
	}
}

// copyTree copies the regular files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// decodeFile decodes a file on the CPU as decode backend=BACKEND does.
func decodeFile(path, backend string) (*stages.Image, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := stages.ResolveJPEGBackend(stages.JPEGBackend(backend))
	return stages.Decode(data, stages.DecodeOptions{Orient: true, JPEG: b}, nil)
}

// cpuJPEGName is the decoder that decode backend=auto uses on the CPU here.
func cpuJPEGName() string {
	b, _ := stages.ResolveJPEGBackend(stages.JPEGAuto)
	return string(b)
}

// A faulting user kernel ends the run as a device error (exit 3, naming CUDA's error) and
// leaves no output and no temporary file, in an image chain and in an array chain. The CLI
// runs as its own process: the fault ruins its CUDA context.
func TestGPUKernelFaultExits3(t *testing.T) {
	requireGPU0(t)
	needBinary(t)
	src := filepath.Join(t.TempDir(), "wild.cu")
	const wild = `extern "C" __global__ void wild(const void *in, void *out) { ((unsigned char *)0x10)[threadIdx.x] = 1; }`
	if err := os.WriteFile(src, []byte(wild), 0o644); err != nil {
		t.Fatal(err)
	}
	arrays := t.TempDir()
	for i := range 3 {
		var b bytes.Buffer
		if err := npy.Write(&b, &npy.Array{Shape: []int{100 + i}, Data: make([]float32, 100+i)}); err != nil {
			t.Fatal(err)
		}
		write(t, arrays, fmt.Sprintf("a%d.npy", i), b.Bytes())
	}
	for _, tc := range []struct{ name, in, spec string }{
		{"image", pngFolder(t, 3), "decode | kernel src=" + src + " fn=wild | save"},
		{"array", arrays, "load | kernel src=" + src + " fn=wild | save format=npy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			cmd := exec.Command(binaryPath, "run", "-i", tc.in, "-o", out, "-p", tc.spec, "--device", "cuda", "-q")
			msg, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFatal || !strings.Contains(string(msg), "CUDA") {
				t.Fatalf("exit %v, want %d with CUDA's error:\n%s", err, exitFatal, msg)
			}
			report := filepath.Join(out, folderrun.ReportName)
			filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && p != report && p != folderrun.JournalPath(report) {
					t.Errorf("left in the output folder: %s", p)
				}
				return nil
			})
		})
	}
}
