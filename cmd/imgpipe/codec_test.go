package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// decode backend=nvjpeg without a device decoder fails before anything is written: exit 2
// on the CPU (a usage error), exit 3 on a GPU that cannot load nvJPEG.
func TestNvJPEGBackendUnavailable(t *testing.T) {
	in := deviceFolder(t)
	fakeDevice(t, schedtest.FakeConfig{Name: "fake GPU", DecoderUnavailable: errors.New("libnvjpeg.so.13: not found")})
	spec := "decode backend=nvjpeg | grayscale | save"
	for _, c := range []struct {
		device string
		code   int
		want   string
	}{
		{"cpu", exitUsage, "this run is on the CPU"},
		{"cuda", exitFatal, "libnvjpeg.so.13"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		code, _, stderr := cli(t, "run", "-i", in, "-o", out, "-p", spec, "--device", c.device)
		if code != c.code || !strings.Contains(stderr, "backend=nvjpeg") || !strings.Contains(stderr, c.want) {
			t.Errorf("--device %s: exit %d, want %d with %q:\n%s", c.device, code, c.code, c.want, stderr)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--device %s: the output folder was created", c.device)
		}
	}
}

// On a device with a file decoder, backend=nvjpeg and auto send the JPEGs the device takes
// to it (the fake decodes with the CPU path's default decoder, so the outputs are the CPU's
// bytes), the other
// formats to the CPU; the report names each input's decoder and the encoder, and the trace
// shows the decode on the stream tracks.
func TestDeviceDecodeRouting(t *testing.T) {
	in := deviceFolder(t, [2]int{64, 40})
	fakeDevice(t, schedtest.FakeConfig{Name: "fake GPU"})
	for _, backend := range []string{"nvjpeg", "auto"} {
		t.Run(backend, func(t *testing.T) {
			outCPU, outDev := filepath.Join(t.TempDir(), "cpu"), filepath.Join(t.TempDir(), "dev")
			trace := filepath.Join(t.TempDir(), "trace.json")
			cpuSpec := "decode | grayscale | blur sigma=1.5 | histogram | save"
			devSpec := "decode backend=" + backend + " | grayscale | blur sigma=1.5 | histogram | save"
			codeCPU, _, errCPU := cli(t, "run", "-i", in, "-o", outCPU, "-p", cpuSpec, "--device", "cpu")
			code, _, stderr := cli(t, "run", "-i", in, "-o", outDev, "-p", devSpec, "--device", "cuda", "--batch", "3", "--trace", trace)
			if code != codeCPU || code == exitFatal || code == exitUsage {
				t.Fatalf("exit %d on the device, %d on the CPU:\n%s\n%s", code, codeCPU, stderr, errCPU)
			}
			cpuLines, _ := readReport(t, filepath.Join(outCPU, folderrun.ReportName))
			devLines, _ := readReport(t, filepath.Join(outDev, folderrun.ReportName))
			if len(cpuLines) != len(devLines) {
				t.Fatalf("%d report lines, %d on the CPU", len(devLines), len(cpuLines))
			}
			onDevice := 0
			for i, l := range devLines {
				c := cpuLines[i]
				want := "go"
				switch {
				case l.Status != "ok":
					want = c.Decoder // a file that fails before decoding names none
				case strings.HasSuffix(l.Input, ".jpg"):
					want = sched.RouteHW
					onDevice++
				}
				if l.Status != c.Status || l.Output != c.Output || l.Decoder != want {
					t.Errorf("%s: %s %q decoder %q, want %s %q decoder %q", l.Input, l.Status, l.Output, l.Decoder, c.Status, c.Output, want)
				}
				if l.Status == "ok" && (l.Encoder != "png-fast" || c.Encoder != "png-fast") {
					t.Errorf("%s: encoder %q (CPU %q), want png-fast", l.Input, l.Encoder, c.Encoder)
				}
				if l.Status == "ok" {
					a, _ := os.ReadFile(filepath.Join(outCPU, c.Output))
					b, _ := os.ReadFile(filepath.Join(outDev, l.Output))
					if len(a) == 0 || !bytes.Equal(a, b) {
						t.Errorf("%s: %d bytes, %d on the CPU", l.Output, len(b), len(a))
					}
				}
			}
			if onDevice == 0 {
				t.Fatal("no JPEG decoded on the device")
			}
			data, err := os.ReadFile(trace)
			if err != nil {
				t.Fatal(err)
			}
			checkTrace(t, data, "fake GPU stream ", "decode", "H2D", "D2H", "D2H files", "save format=png compression=fast")
		})
	}
}

// bench decode measures every decoder, the device's batched decode included, with its
// engine count; a folder without JPEGs is a usage error.
func TestBenchDecode(t *testing.T) {
	in := deviceFolder(t)
	fakeDevice(t, schedtest.FakeConfig{Name: "fake GPU", DecoderEngines: 7})
	code, stdout, stderr := cli(t, "bench", "decode", in, "--device", "cuda", "--repeats", "1", "--batch", "4")
	if code != exitOK || !strings.Contains(stdout, "decode go") || !strings.Contains(stdout, "decode device") ||
		!strings.Contains(stdout, "7 hardware engines") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, _, stderr := cli(t, "bench", "decode", t.TempDir(), "--device", "cpu"); code != exitUsage {
		t.Errorf("no JPEGs: exit %d\n%s", code, stderr)
	}
}
