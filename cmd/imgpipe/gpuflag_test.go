package main

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// recordOrdinal makes openDevice (run's and the bench's) return a fake GPU and remember the
// ordinal it was asked for; opens counts the calls.
func recordOrdinal(t *testing.T) (ordinal, opens *atomic.Int32) {
	t.Helper()
	ordinal, opens = new(atomic.Int32), new(atomic.Int32)
	ordinal.Store(-1)
	setOpenDevice(t, func(n int) (sched.Device, func() error, error) {
		ordinal.Store(int32(n))
		opens.Add(1)
		d := fakeGPU(schedtest.FakeConfig{PageableRate: 1e9})
		return d, func() error { d.Close(); return nil }, nil
	})
	smallCopyLimit(t)
	return ordinal, opens
}

// withEnv sets the variables that args name as "env:NAME=value" for the test, and returns
// the other arguments.
func withEnv(t *testing.T, args []string) []string {
	var rest []string
	for _, a := range args {
		if kv, ok := strings.CutPrefix(a, "env:"); ok {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		} else {
			rest = append(rest, a)
		}
	}
	return rest
}

// noSuchGPUErr is what cudastage.OpenGPU returns for an ordinal past the last GPU.
var noSuchGPUErr = fmt.Errorf("cudastage: %w 4: the driver sees 2 GPUs, numbered 0 to 1", cudastage.ErrNoSuchGPU)

// smallFolder is a folder of two random PNGs.
func smallFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(7))
	write(t, dir, "a.png", pngBytes(t, photo(rng, 17, 9)))
	write(t, dir, "b/c.png", pngBytes(t, photo(rng, 8, 21)))
	return dir
}

// gpuRunArgs are the arguments of a quiet `imgpipe run` of "decode | grayscale | save" over
// in into out: from flags, or from a job (writeJob) when exec, its execution mapping, is
// set; with a small page-locked budget (the default sizes slots for 1080p frames).
func gpuRunArgs(t *testing.T, in, out, exec string) []string {
	args := []string{"run", "-i", in, "-o", out, "-p", "decode | grayscale | save", "--quiet"}
	if exec != "" {
		args = []string{"run", writeJob(t, in, exec), "-o", out, "--quiet"}
	}
	return append(args, "--pinned-mb", "1", "--batch", "2")
}

// writeJob writes a job over in whose execution mapping is exec, and returns its path.
func writeJob(t *testing.T, in, exec string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.yaml")
	src := fmt.Sprintf("input: {dir: %s}\npipeline: [decode, grayscale, save]\nexecution: {%s}\n", in, exec)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The ordinal from --gpu or the job's execution.gpu (the flag winning) is the one opened,
// and the summary names the device that ran.
func TestRunGPUOrdinalReachesDevice(t *testing.T) {
	in := smallFolder(t)
	tests := []struct {
		name string
		exec string // the job's execution mapping; "" runs without a job
		args []string
		want int32
	}{
		{"default", "", []string{"--device", "cuda"}, 0},
		{"flag", "", []string{"--device", "cuda", "--gpu", "3"}, 3},
		{"flag under auto", "", []string{"--gpu", "1"}, 1},
		{"job", "device: cuda, gpu: 2", nil, 2},
		{"flag overrides job", "device: cuda, gpu: 2", []string{"--gpu", "1"}, 1},
		{"flag 0 overrides job", "device: cuda, gpu: 2", []string{"--gpu", "0"}, 0},
		{"job without gpu", "device: cuda", nil, 0},
		{"env", "", []string{"--device", "cuda", "env:IMGPIPE_GPU=3"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ordinal, opens := recordOrdinal(t)
			out := filepath.Join(t.TempDir(), "out")
			code, _, stderr := cli(t, append(gpuRunArgs(t, in, out, tt.exec), withEnv(t, tt.args)...)...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if opens.Load() != 1 || ordinal.Load() != tt.want {
				t.Errorf("opened %d times, GPU %d; want once, GPU %d", opens.Load(), ordinal.Load(), tt.want)
			}
			if _, sum := readReport(t, filepath.Join(out, folderrun.ReportName)); sum.Device != "fake GPU" || sum.OK != 2 {
				t.Errorf("summary %+v", sum)
			}
		})
	}
}

// Bad ordinals are usage errors found before any GPU is opened or output created.
func TestRunGPUFlagErrors(t *testing.T) {
	in := smallFolder(t)
	tests := []struct {
		name string
		args []string // after -i -o -p, or after the job
		exec string
		want string
	}{
		{"negative", []string{"--gpu", "-1"}, "", "imgpipe: --gpu: gpu=-1: ordinal -1 out of range (0..1023)"},
		{"too high", []string{"--gpu", "1024"}, "", "imgpipe: --gpu: gpu=1024: ordinal 1024 out of range (0..1023)"},
		{"word", []string{"--gpu", "first"}, "", `imgpipe: --gpu: gpu=first: "first" is not a GPU ordinal (want all, an ordinal from 0, or a list such as 0,2,3)`},
		{"fraction", []string{"--gpu", "1.5"}, "", `"1.5" is not a GPU ordinal`},
		{"duplicate", []string{"--gpu", "0,1,1"}, "", "imgpipe: --gpu: gpu=0,1,1: GPU 1 named twice"},
		{"list out of range", []string{"--gpu", "0,2000"}, "", "gpu=0,2000: ordinal 2000 out of range (0..1023)"},
		{"env", []string{"env:IMGPIPE_GPU=al"}, "", `imgpipe: $IMGPIPE_GPU: gpu=al: "al" is not a GPU ordinal`},
		{"job negative", nil, "device: cuda, gpu: -1", "job.yaml:3:32: execution.gpu: gpu=-1: ordinal -1 out of range (0..1023)"},
		{"job word", nil, "gpu: two", `job.yaml:3:18: execution.gpu: gpu=two: "two" is not a GPU ordinal`},
		{"job list duplicate", nil, "gpu: [1, 0, 1]", "job.yaml:3:18: execution.gpu: gpu=1,0,1: GPU 1 named twice"},
		{"job list of lists", nil, "gpu: [[1]]", "execution.gpu: want a value"},
		// A valid flag does not excuse a bad job: the job is checked as written.
		{"job bad, flag good", []string{"--gpu", "1"}, "gpu: -3", "execution.gpu: gpu=-3: ordinal -3 out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, opens := recordOrdinal(t)
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"run", "-i", in, "-o", out, "-p", "decode | grayscale | save"}
			if tt.exec != "" {
				args = []string{"run", writeJob(t, in, tt.exec), "-o", out}
			}
			code, stdout, stderr := cli(t, append(args, withEnv(t, tt.args)...)...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, stderr, exitUsage, tt.want)
			}
			if opens.Load() != 0 {
				t.Errorf("a GPU was opened %d times", opens.Load())
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output folder created: %v", err)
			}
		})
	}
}

// An ordinal the driver does not have is a runtime error under cuda and auto alike (auto
// does not quietly run on the CPU instead), saying how many GPUs there are; cpu never asks.
func TestRunNoSuchGPU(t *testing.T) {
	in := smallFolder(t)
	for _, device := range []string{"cuda", "auto"} {
		t.Run(device, func(t *testing.T) {
			var asked atomic.Int32
			setOpenDevice(t, func(n int) (sched.Device, func() error, error) {
				asked.Store(int32(n))
				return nil, nil, noSuchGPUErr
			})
			out := filepath.Join(t.TempDir(), "out")
			code, stdout, stderr := cli(t, "run", "-i", in, "-o", out, "-p", "decode | grayscale | save", "--device", device, "--gpu", "4")
			const want = "imgpipe: cudastage: no GPU 4: the driver sees 2 GPUs, numbered 0 to 1; 'imgpipe devices' lists them\n"
			if code != exitFatal || stdout != "" || stderr != want {
				t.Errorf("exit %d, stderr %q; want exit %d, %q", code, stderr, exitFatal, want)
			}
			if asked.Load() != 4 {
				t.Errorf("asked for GPU %d, want 4", asked.Load())
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output folder created: %v", err)
			}
		})
	}
	t.Run("cpu", func(t *testing.T) {
		setOpenDevice(t, func(int) (sched.Device, func() error, error) {
			t.Error("--device cpu opened a GPU")
			return nil, nil, noSuchGPUErr
		})
		code, _, stderr := cli(t, "run", "-i", in, "-o", filepath.Join(t.TempDir(), "out"), "-p", "decode | grayscale | save",
			"--device", "cpu", "--gpu", "4", "--quiet")
		if code != exitOK {
			t.Errorf("exit %d: %s", code, stderr)
		}
	})
}

func TestRunHelpMentionsGPU(t *testing.T) {
	code, stdout, _ := cli(t, "run", "--help")
	if code != exitOK || !strings.Contains(stdout, "--gpu string") || !strings.Contains(stdout, "--gpu N") || !strings.Contains(stdout, "--gpu all") {
		t.Errorf("run --help (exit %d) does not document --gpu:\n%s", code, stdout)
	}
}

// benchModes are minimal invocations of each bench mode on a device.
func benchModes(t *testing.T) map[string][]string {
	in := t.TempDir()
	benchPhotoPNG(t, filepath.Join(in, "a.png"), 12, 10, 1)
	return map[string][]string{
		"raw":   {"bench", "raw", "--size", "16x8", "--frames", "2", "--repeats", "1", "--warmup", "0"},
		"files": {"bench", "files", in, "--repeats", "1", "--warmup", "0", "--pinned-mb", "1", "--batch", "2"},
		"copy":  {"bench", "copy", "--size", "16x8", "--batch", "2", "--repeats", "1"},
	}
}

func TestBenchGPUFlag(t *testing.T) {
	for mode, args := range benchModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Run("ordinal", func(t *testing.T) {
				ordinal, opens := recordOrdinal(t)
				code, stdout, stderr := benchCLI(t, context.Background(), append(args, "--device", "cuda", "--gpu", "2")...)
				if code != exitOK {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				if opens.Load() != 1 || ordinal.Load() != 2 {
					t.Errorf("opened %d times, GPU %d; want once, GPU 2", opens.Load(), ordinal.Load())
				}
				if !strings.Contains(stdout+stderr, "fake GPU") {
					t.Errorf("output does not name the device:\n%s", stderr)
				}
			})
			t.Run("default", func(t *testing.T) {
				ordinal, _ := recordOrdinal(t)
				if code, _, stderr := benchCLI(t, context.Background(), append(args, "--device", "cuda")...); code != exitOK || ordinal.Load() != 0 {
					t.Errorf("exit %d, GPU %d; want 0, GPU 0: %s", code, ordinal.Load(), stderr)
				}
			})
			for _, bad := range []struct{ v, want string }{
				{"-1", "imgpipe: --gpu: gpu=-1: ordinal -1 out of range (0..1023)"},
				{"x", `imgpipe: --gpu: gpu=x: "x" is not a GPU ordinal`},
				{"all", "imgpipe: --gpu all: this mode measures one GPU; name one (bench raw takes several)"},
				{"0,1", "imgpipe: --gpu 0,1: this mode measures one GPU; name one"},
			} {
				if mode == "raw" && strings.Contains(bad.want, "this mode") {
					continue // bench raw runs on several (TestBenchRawSeveralGPUs)
				}
				t.Run("bad "+bad.v, func(t *testing.T) {
					_, opens := recordOrdinal(t)
					code, _, stderr := benchCLI(t, context.Background(), append(args, "--gpu", bad.v)...)
					if code != exitUsage || !strings.Contains(stderr, bad.want) || opens.Load() != 0 {
						t.Errorf("exit %d, %d opens, stderr %q; want exit %d with %q", code, opens.Load(), stderr, exitUsage, bad.want)
					}
				})
			}
			t.Run("no such GPU under auto", func(t *testing.T) {
				recordOrdinal(t)
				setOpenDevice(t, func(int) (sched.Device, func() error, error) { return nil, nil, noSuchGPUErr })
				code, _, stderr := benchCLI(t, context.Background(), append(args, "--gpu", "4")...)
				if code != exitFatal || !strings.Contains(stderr, "no GPU 4: the driver sees 2 GPUs, numbered 0 to 1; 'imgpipe devices' lists them") ||
					strings.Contains(stderr, "running on the CPU") {
					t.Errorf("exit %d, stderr %q; want exit %d naming the GPU count", code, stderr, exitFatal)
				}
			})
		})
	}
}
