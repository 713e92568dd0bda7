package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/stages"
)

// noGPU makes openDevice and listDevices fail as on a machine without the NVIDIA driver.
func noGPU(t *testing.T) *atomic.Int32 {
	t.Helper()
	var opened atomic.Int32
	err := fmt.Errorf("%w (is the NVIDIA driver installed?): ", cu.ErrNoDriver)
	setOpenDevice(t, func(int) (sched.Device, func() error, error) {
		opened.Add(1)
		return nil, nil, err
	})
	oldList := listDevices
	listDevices = func() ([]cudastage.DeviceInfo, error) { return nil, err }
	t.Cleanup(func() { listDevices = oldList })
	return &opened
}

func setOpenDevice(t *testing.T, open func(int) (sched.Device, func() error, error)) {
	t.Helper()
	old := openDevice
	openDevice = open
	t.Cleanup(func() { openDevice = old })
}

// fakeDevice makes openDevice return a CPU fake of a GPU; closes counts its closing.
func fakeDevice(t *testing.T, cfg schedtest.FakeConfig) (closes *atomic.Int32) {
	t.Helper()
	closes = new(atomic.Int32)
	setOpenDevice(t, func(int) (sched.Device, func() error, error) {
		d := schedtest.NewFake(cfg)
		return d, func() error { closes.Add(1); d.Close(); return nil }, nil
	})
	return closes
}

// driverMissing reports whether this machine really has no CUDA driver, for the tests
// that check the real messages.
func driverMissing() bool { return cu.Load() != nil }

func encodeWith(t *testing.T, m image.Image, enc func(*bytes.Buffer, image.Image) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := enc(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// deviceFolder writes images of mixed sizes (1×1, lines, odd sizes, larger ones given in
// extra) and formats (PNG, JPEG, GIF, BMP, TIFF, gray and paletted sources), and a few
// broken files.
func deviceFolder(t *testing.T, extra ...[2]int) string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(42))
	sizes := append([][2]int{{1, 1}, {1, 13}, {17, 1}, {17, 9}, {33, 65}, {64, 48}, {101, 7}, {40, 30}}, extra...)
	for i, s := range sizes {
		m := photo(rng, s[0], s[1])
		switch i % 6 {
		case 0:
			write(t, dir, fmt.Sprintf("png/%02d.png", i), pngBytes(t, m))
		case 1:
			write(t, dir, fmt.Sprintf("jpeg/%02d.jpg", i), jpegBytes(t, m))
		case 2:
			write(t, dir, fmt.Sprintf("gif/%02d.gif", i), encodeWith(t, m, func(b *bytes.Buffer, m image.Image) error { return gif.Encode(b, m, nil) }))
		case 3:
			write(t, dir, fmt.Sprintf("bmp/%02d.bmp", i), encodeWith(t, m, func(b *bytes.Buffer, m image.Image) error { return bmp.Encode(b, m) }))
		case 4:
			write(t, dir, fmt.Sprintf("tiff/%02d.tif", i), encodeWith(t, m, func(b *bytes.Buffer, m image.Image) error { return tiff.Encode(b, m, nil) }))
		case 5:
			g := image.NewGray(m.Bounds())
			for k := range g.Pix {
				g.Pix[k] = uint8(rng.Intn(256))
			}
			write(t, dir, fmt.Sprintf("gray/%02d.png", i), pngBytes(t, g))
		}
	}
	pal := image.NewPaletted(image.Rect(0, 0, 23, 11), color.Palette{color.Black, color.White, color.RGBA{200, 10, 30, 255}})
	for k := range pal.Pix {
		pal.Pix[k] = uint8(rng.Intn(3))
	}
	write(t, dir, "pal.png", pngBytes(t, pal))
	p := pngBytes(t, photo(rng, 20, 20))
	write(t, dir, "broken/trunc.png", p[:len(p)-30])
	write(t, dir, "broken/text.jpg", []byte("not a picture"))
	return dir
}

// compareDevices runs spec over in with --device cpu and with --device dev (plus args)
// and checks that both write the same files, byte for byte, and the same report lines; it
// returns both summaries and the device run's stderr.
func compareDevices(t *testing.T, in, spec, dev string, args ...string) (cpuSum, devSum pipeline.Summary, stderr string) {
	t.Helper()
	outCPU, outDev := filepath.Join(t.TempDir(), "cpu"), filepath.Join(t.TempDir(), "dev")
	code, _, errCPU := cli(t, "run", "-i", in, "-o", outCPU, "-p", spec, "--device", "cpu")
	if code != exitSomeFailed && code != exitOK {
		t.Fatalf("cpu run: exit %d\n%s", code, errCPU)
	}
	code2, _, stderr := cli(t, append([]string{"run", "-i", in, "-o", outDev, "-p", spec, "--device", dev}, args...)...)
	if code2 != code {
		t.Fatalf("%s run: exit %d, cpu run %d\n%s", dev, code2, code, stderr)
	}
	linesCPU, cpuSum := readReport(t, filepath.Join(outCPU, folderrun.ReportName))
	linesDev, devSum := readReport(t, filepath.Join(outDev, folderrun.ReportName))
	// A GPU run writes JPEG with nvJPEG: the same pixels encoded by another encoder, so
	// those outputs are compared decoded (jpegClose), and the report names the encoder
	// (the CPU's is stages.JPEGEncoder).
	nvjpegOut := map[string]bool{}
	for i := range linesDev {
		if linesDev[i].Encoder == "nvjpeg" {
			nvjpegOut[linesDev[i].Output] = true
			linesDev[i].Encoder = stages.JPEGEncoder()
		}
	}
	a, _ := json.Marshal(linesCPU)
	b, _ := json.Marshal(linesDev)
	if !bytes.Equal(a, b) {
		t.Errorf("report lines differ:\ncpu: %s\n%s: %s", a, dev, b)
	}
	fc, fd := files(t, outCPU), files(t, outDev)
	delete(fc, folderrun.ReportName)
	delete(fd, folderrun.ReportName)
	if len(fc) != len(fd) || len(fc) == 0 {
		t.Errorf("%d outputs on the CPU, %d on %s", len(fc), len(fd), dev)
	}
	for name := range fc {
		x, _ := os.ReadFile(filepath.Join(outCPU, name))
		y, err := os.ReadFile(filepath.Join(outDev, name))
		if nvjpegOut[filepath.ToSlash(name)] {
			if err == nil {
				err = jpegClose(x, y)
			}
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s: outputs differ (%v)", name, err)
		}
		if strings.HasSuffix(name, ".png") {
			// Equal is not enough: both sides once wrote the same unreadable files.
			if _, err := png.Decode(bytes.NewReader(x)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	return cpuSum, devSum, stderr
}

// --device cuda without a working GPU is a runtime error (exit 3) that says why, before
// anything is created.
func TestRunCudaWithoutGPU(t *testing.T) {
	in := deviceFolder(t)
	check := func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		code, stdout, stderr := cli(t, "run", "-i", in, "-o", out, "-p", chain, "--device", "cuda")
		if code != exitFatal || stdout != "" {
			t.Errorf("exit %d, stdout %q", code, stdout)
		}
		const want = "imgpipe: --device cuda: no usable GPU: CUDA driver library libcuda.so.1 not found (is the NVIDIA driver installed?)"
		if !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 || strings.HasSuffix(stderr, ": \n") {
			t.Errorf("stderr:\n%s", stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Error("output folder created")
		}
	}
	t.Run("no driver", func(t *testing.T) {
		noGPU(t)
		check(t)
	})
	t.Run("this machine", func(t *testing.T) {
		if !driverMissing() {
			t.Skip("this machine has a CUDA driver")
		}
		check(t)
	})
}

// --device auto without a GPU says so in one line and gives the CPU's result.
func TestRunAutoWithoutGPU(t *testing.T) {
	in := deviceFolder(t)
	opened := noGPU(t)
	cpuSum, autoSum, stderr := compareDevices(t, in, chain, "auto", "-q")
	// -q hides the summary, never errors: the folder's two broken files are listed.
	const fails = "imgpipe: broken/text.jpg: decode: unknown image format\nimgpipe: broken/trunc.png: decode: png: invalid format: not enough pixel data\n"
	const want = "imgpipe: no usable GPU (CUDA driver library libcuda.so.1 not found); running on the CPU ('imgpipe devices' says why)\n" + fails
	if stderr != want {
		t.Errorf("stderr:\n%q\nwant\n%q", stderr, want)
	}
	if autoSum.Device != "cpu" || autoSum.Streams != 0 || autoSum.OK != cpuSum.OK || opened.Load() != 1 {
		t.Errorf("summary %+v, GPU opened %d times", autoSum, opened.Load())
	}
	// Without pixel stages auto does not even look for a GPU.
	opened.Store(0)
	code, _, stderr := cli(t, "run", "-i", in, "-o", filepath.Join(t.TempDir(), "o"), "-p", "decode backend=go | save", "-q")
	if code != exitSomeFailed || stderr != fails || opened.Load() != 0 {
		t.Errorf("decode backend=go | save: exit %d, stderr %q, GPU opened %d times", code, stderr, opened.Load())
	}
	// The default device is auto.
	code, _, stderr = cli(t, "run", "-i", in, "-o", filepath.Join(t.TempDir(), "o"), "-p", chain, "-q")
	if code != exitSomeFailed || stderr != want {
		t.Errorf("default device: exit %d, stderr %q", code, stderr)
	}
}

// stubNVRTC makes `imgpipe devices` see info, or err when it is set.
func stubNVRTC(t *testing.T, info nvrtc.Info, err error) {
	old := probeNVRTC
	probeNVRTC = func() (nvrtc.Info, error) { return info, err }
	t.Cleanup(func() { probeNVRTC = old })
}

func TestDevicesWithoutGPU(t *testing.T) {
	stubNVRTC(t, nvrtc.Info{}, errors.New("NVRTC: library not found"))
	check := func(t *testing.T) {
		code, stdout, stderr := cli(t, "devices")
		const why = "CUDA driver library libcuda.so.1 not found (is the NVIDIA driver installed?)"
		if code != exitOK || stderr != "" || !strings.HasPrefix(stdout, "no usable GPU: "+why) || strings.Count(stdout, "\n") != 2 ||
			!strings.HasSuffix(stdout, "\nno NVRTC (the kernel stage cannot compile): NVRTC: library not found\n") {
			t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		code, stdout, _ = cli(t, "devices", "--json")
		var got struct {
			Devices    []cudastage.DeviceInfo `json:"devices"`
			Error      *string                `json:"error"`
			NVRTC      *nvrtc.Info            `json:"nvrtc"`
			NVRTCError string                 `json:"nvrtc_error"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitOK {
			t.Fatalf("exit %d, not JSON (%v): %s", code, err, stdout)
		}
		if got.Devices == nil || len(got.Devices) != 0 || got.Error == nil || !strings.HasPrefix(*got.Error, why) ||
			got.NVRTC != nil || got.NVRTCError != "NVRTC: library not found" {
			t.Errorf("json: %s", stdout)
		}
	}
	t.Run("no driver", func(t *testing.T) {
		noGPU(t)
		check(t)
	})
	t.Run("this machine", func(t *testing.T) {
		if !driverMissing() {
			t.Skip("this machine has a CUDA driver")
		}
		check(t)
	})
	t.Run("no device", func(t *testing.T) {
		old := listDevices
		listDevices = func() ([]cudastage.DeviceInfo, error) { return nil, nil }
		defer func() { listDevices = old }()
		code, stdout, _ := cli(t, "devices")
		if code != exitOK || stdout != "no usable GPU: the CUDA driver reports no device\nno NVRTC (the kernel stage cannot compile): NVRTC: library not found\n" {
			t.Errorf("exit %d, %q", code, stdout)
		}
	})
}

func TestDevicesList(t *testing.T) {
	infos := []cudastage.DeviceInfo{
		{Index: 0, Name: "NVIDIA H200", ComputeCapability: "9.0", Major: 9, SMs: 132, TotalMemory: 150 << 30, AsyncEngines: 3, DriverVersion: 13000, CUDAVersion: "13.0", DriverRelease: "580.65.06"},
		{Index: 1, Name: "NVIDIA T4", ComputeCapability: "7.5", Major: 7, Minor: 5, SMs: 40, TotalMemory: 15 << 30, AsyncEngines: 2, DriverVersion: 13000, CUDAVersion: "13.0"},
	}
	old, oldJPEG := listDevices, probeNVJPEG
	listDevices = func() ([]cudastage.DeviceInfo, error) { return infos, nil }
	probeNVJPEG = func(int) cudastage.NVJPEGInfo {
		return cudastage.NVJPEGInfo{Path: "/usr/lib/libnvjpeg.so.13", Version: "13.0.1", Engines: 7, Cores: 5}
	}
	defer func() { listDevices, probeNVJPEG = old, oldJPEG }()
	nv := nvrtc.Info{Version: "13.0", Path: "/usr/local/cuda/lib64/libnvrtc.so.13", Archs: []int{75, 90}}
	stubNVRTC(t, nv, nil)
	code, stdout, _ := cli(t, "devices")
	want := "GPU 0: NVIDIA H200, compute capability 9.0, 132 SMs, 150.0 GiB, 3 async copy engines, CUDA 13.0, driver 580.65.06\n" +
		"GPU 1: NVIDIA T4, compute capability 7.5, 40 SMs, 15.0 GiB, 2 async copy engines, CUDA 13.0\n" +
		"nvJPEG: /usr/lib/libnvjpeg.so.13 (version 13.0.1), 7 hardware decode engines × 5 cores\n" +
		"NVRTC 13.0 (/usr/local/cuda/lib64/libnvrtc.so.13)\n"
	if code != exitOK || stdout != want {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	code, stdout, _ = cli(t, "devices", "--json")
	var got struct {
		Devices []cudastage.DeviceInfo `json:"devices"`
		NVJPEG  cudastage.NVJPEGInfo   `json:"nvjpeg"`
		Error   string                 `json:"error"`
		NVRTC   *nvrtc.Info            `json:"nvrtc"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitOK || len(got.Devices) != 2 || got.Devices[1] != infos[1] || got.Error != "" || got.NVJPEG.Engines != 7 ||
		got.NVRTC == nil || got.NVRTC.Path != nv.Path || len(got.NVRTC.Archs) != 2 {
		t.Errorf("exit %d (%v):\n%s", code, err, stdout)
	}
	if code, _, stderr := cli(t, "devices", "extra"); code != exitUsage {
		t.Errorf("devices extra: exit %d %s", code, stderr)
	}
}

// --device cuda on a device (here the CPU fake of one) gives the CPU's bytes, with the
// GPU figures in the report and on stderr, and a trace with stream tracks.
func TestRunCudaOnFakeDevice(t *testing.T) {
	in := deviceFolder(t, [2]int{300, 200})
	closes := fakeDevice(t, schedtest.FakeConfig{Name: "fake GPU", H2DRate: 1e9, D2HRate: 1e9})
	for _, spec := range []string{
		chain,
		"decode backend=go | boxblur radius=3 | histogram | save format=jpeg quality=90",
		"decode backend=go | transpose | save",
	} {
		t.Run(spec, func(t *testing.T) {
			trace := filepath.Join(t.TempDir(), "trace.json")
			cpuSum, sum, stderr := compareDevices(t, in, spec, "cuda", "--batch", "4", "--workers", "3", "--trace", trace, "--pinned-mb", "1")
			if sum.Device != "fake GPU" || sum.Streams != pipeline.DefaultStreams || sum.Batch != 4 || sum.Batches == 0 ||
				sum.OK != cpuSum.OK || sum.Failed != cpuSum.Failed || sum.Overlap <= 0 {
				t.Errorf("summary %+v", sum)
			}
			// 1 MiB for 4 slots of input and output: the 300×200 image (180 kB) does not fit.
			if sum.CPUFallback != 1 {
				t.Errorf("%d images on the CPU path, want 1", sum.CPUFallback)
			}
			if !strings.Contains(stderr, "on fake GPU (2 streams, batch 4; ") || !strings.Contains(stderr, "overlap efficiency") ||
				!strings.Contains(stderr, "1 too large for a slot, run on the CPU)") {
				t.Errorf("stderr:\n%s", stderr)
			}
			data, err := os.ReadFile(trace)
			if err != nil {
				t.Fatal(err)
			}
			checkTrace(t, data, "fake GPU stream ", "H2D", "D2H")
		})
	}
	if closes.Load() != 3 {
		t.Errorf("device closed %d times for 3 runs", closes.Load())
	}
}

// checkTrace checks a trace file: valid JSON with stream tracks (prefix) holding the given
// spans, and decode and save worker tracks.
func checkTrace(t *testing.T, data []byte, streamPrefix string, streamSpans ...string) {
	t.Helper()
	var file struct {
		TraceEvents []struct {
			Name string
			Ph   string
			Tid  int
			Args map[string]any
		}
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	tracks := map[int]string{}
	for _, e := range file.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			tracks[e.Tid] = e.Args["name"].(string)
		}
	}
	seen := map[string]bool{}
	for _, e := range file.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		tr := tracks[e.Tid]
		switch {
		case strings.HasPrefix(tr, streamPrefix):
			seen["stream:"+e.Name] = true
		case strings.HasPrefix(tr, "decode worker "):
			seen["decode worker"] = true
		case strings.HasPrefix(tr, "save worker "):
			seen["save worker"] = true
		}
	}
	want := []string{"decode worker", "save worker"}
	for _, s := range streamSpans {
		want = append(want, "stream:"+s)
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("trace lacks %s; tracks %v, seen %v", w, tracks, seen)
		}
	}
}

// A device fault mid-run: exit 3 with the device's error; what was written is whole and
// reported.
func TestRunCudaDeviceFault(t *testing.T) {
	in := t.TempDir()
	rng := rand.New(rand.NewSource(9))
	img := pngBytes(t, photo(rng, 50, 40))
	for i := 0; i < 120; i++ {
		write(t, in, fmt.Sprintf("%03d.png", i), img)
	}
	var launches atomic.Int32
	fakeDevice(t, schedtest.FakeConfig{KernelLatency: 100 * time.Microsecond, Fault: func(call string) error {
		if strings.HasPrefix(call, "Run ") && launches.Add(1) == 20 {
			return errors.New("CUDA_ERROR_ILLEGAL_ADDRESS (injected)")
		}
		return nil
	}})
	out := filepath.Join(t.TempDir(), "out")
	code, _, stderr := cli(t, "run", "-i", in, "-o", out, "-p", "decode | grayscale | blur | save", "--device", "cuda", "--batch", "4", "--workers", "2", "--pinned-mb", "4")
	if code != exitFatal || !strings.Contains(stderr, "imgpipe: device error: fake: batch ") || !strings.Contains(stderr, "CUDA_ERROR_ILLEGAL_ADDRESS (injected)") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	lines, sum := readReport(t, filepath.Join(out, folderrun.ReportName))
	if sum.Interrupted || sum.OK == 0 || sum.OK >= 120 || len(lines) != sum.OK {
		t.Errorf("summary %+v, %d lines", sum, len(lines))
	}
	written := files(t, out)
	delete(written, folderrun.ReportName)
	if len(written) != sum.OK {
		t.Errorf("%d outputs, %d reported", len(written), sum.OK)
	}
	for _, l := range lines {
		if _, ok := written[l.Output]; !ok || l.Status != pipeline.StatusOK {
			t.Errorf("%s: %s, written %v", l.Input, l.Status, ok)
		}
	}
	// The inputs in flight were not done: --resume does exactly those.
	code, _, stderr = cli(t, "run", "-i", in, "-o", out, "-p", "decode | grayscale | blur | save", "--device", "cpu", "--resume", "-q")
	_, sum2 := readReport(t, filepath.Join(out, folderrun.ReportName))
	if code != exitOK || sum2.Skipped != sum.OK || sum2.OK != 120-sum.OK || sum2.Failed != 0 {
		t.Errorf("resume: exit %d, %+v\n%s", code, sum2, stderr)
	}
}

// An interrupt (the context the CLI gets from SIGINT) during a device run: exit 130, the
// report lists exactly the outputs written, and nothing is partial.
func TestRunCudaInterrupted(t *testing.T) {
	in := t.TempDir()
	rng := rand.New(rand.NewSource(10))
	img := pngBytes(t, photo(rng, 80, 60))
	for i := 0; i < 200; i++ {
		write(t, in, fmt.Sprintf("d%d/%03d.png", i%3, i), img)
	}
	fakeDevice(t, schedtest.FakeConfig{H2DRate: 10e6, D2HRate: 10e6})
	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Interrupted at an exact point (after 9 results), not by a timer racing the run.
	n := 0
	resultHook = func(*pipeline.Result) {
		if n++; n == 9 {
			cancel()
		}
	}
	defer func() { resultHook = nil }()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"run", "-i", in, "-o", out, "-p", "decode | blur sigma=3 | save", "--device", "cuda", "--batch", "4", "--pinned-mb", "4"}, &stdout, &stderr)
	if code != exitInterrupted || !strings.Contains(stderr.String(), "imgpipe: interrupted; the report covers the") {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	lines, sum := readReport(t, filepath.Join(out, folderrun.ReportName))
	if !sum.Interrupted || sum.OK < 9 || sum.OK >= 200 || sum.Failed != 0 {
		t.Errorf("summary %+v", sum)
	}
	written := files(t, out)
	delete(written, folderrun.ReportName)
	if len(written) != len(lines) {
		t.Errorf("%d outputs, %d report lines", len(written), len(lines))
	}
	for _, l := range lines {
		if _, ok := written[l.Output]; !ok {
			t.Errorf("%s reported but not written", l.Output)
		}
	}
}

func TestRunPinnedFlag(t *testing.T) {
	in := deviceFolder(t)
	code, _, stderr := cli(t, "run", "-i", in, "-o", filepath.Join(t.TempDir(), "o"), "-p", chain, "--pinned-mb", "-1")
	if code != exitUsage || !strings.Contains(stderr, "--pinned-mb: pinned_mb=-1 is out of range") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	// A job sets it too, and the flag overrides the job.
	dir := t.TempDir()
	job := filepath.Join(dir, "job.yaml")
	write(t, dir, "job.yaml", []byte(fmt.Sprintf("input: {dir: %s}\npipeline: [decode, grayscale, save]\noutput: {dir: %s}\nexecution: {device: cuda, pinned_mb: 7000000}\n", in, filepath.Join(dir, "out"))))
	code, _, stderr = cli(t, "run", job)
	if code != exitUsage || !strings.Contains(stderr, "job.yaml:4:38: execution.pinned_mb: pinned_mb=7000000 is out of range") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
}

// jpegClose checks that two JPEG encodings of the same pixels decode to images of the same
// size within 30 dB PSNR of each other (two encoders' quantisation at the same quality).
func jpegClose(a, b []byte) error {
	x, err := stages.Decode(a, stages.DecodeOptions{JPEG: stages.JPEGGo}, nil)
	if err != nil {
		return err
	}
	y, err := stages.Decode(b, stages.DecodeOptions{JPEG: stages.JPEGGo}, nil)
	if err != nil {
		return err
	}
	if x.Shape() != y.Shape() {
		return fmt.Errorf("JPEG outputs are %v and %v", x.Shape(), y.Shape())
	}
	var se float64
	for i := range x.Pix {
		d := float64(x.Pix[i]) - float64(y.Pix[i])
		se += d * d
	}
	if mse := se / float64(len(x.Pix)); mse > 0 && 10*math.Log10(255*255/mse) < 30 {
		return fmt.Errorf("JPEG outputs differ by %.1f dB PSNR, want ≥ 30", 10*math.Log10(255*255/mse))
	}
	return nil
}
