package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// fakeGPUs makes openDevice open a fake GPU named "GPU n" for ordinals below n (and fail
// with noSuchGPUErr for the others), and listDevices list them; it returns the ordinals
// opened and closed, in order.
func fakeGPUs(t *testing.T, n int) (opened, closed func() []int) {
	t.Helper()
	var mu sync.Mutex
	var op, cl []int
	setOpenDevice(t, func(ord int) (sched.Device, func() error, error) {
		if ord >= n {
			return nil, nil, noSuchGPUErr
		}
		mu.Lock()
		op = append(op, ord)
		mu.Unlock()
		d := fakeGPU(schedtest.FakeConfig{Name: fmt.Sprintf("GPU %d", ord)})
		return d, func() error {
			mu.Lock()
			cl = append(cl, ord)
			mu.Unlock()
			d.Close()
			return nil
		}, nil
	})
	old := listDevices
	listDevices = func() ([]cudastage.DeviceInfo, error) {
		infos := make([]cudastage.DeviceInfo, n)
		for i := range infos {
			infos[i] = cudastage.DeviceInfo{Index: i, Name: "fake"}
		}
		return infos, nil
	}
	t.Cleanup(func() { listDevices = old })
	get := func(s *[]int) func() []int {
		return func() []int { mu.Lock(); defer mu.Unlock(); return slices.Clone(*s) }
	}
	return get(&op), get(&cl)
}

// --gpu all and a list open those GPUs, run over them (the summary names each, with its
// share), and close every one; a list with a GPU the driver lacks closes those opened.
func TestRunSeveralGPUs(t *testing.T) {
	in := smallFolder(t)
	tests := []struct {
		name   string
		args   []string
		exec   string // a job's execution mapping, instead of -i -p
		opened []int
		code   int
		want   string // in stderr, for a failure
	}{
		{name: "all", args: []string{"--gpu", "all"}, opened: []int{0, 1, 2}},
		{name: "list", args: []string{"--device", "cuda", "--gpu", "2,0"}, opened: []int{2, 0}},
		{name: "one", args: []string{"--gpu", "1"}, opened: []int{1}},
		{name: "job all", exec: "device: cuda, gpu: all", opened: []int{0, 1, 2}},
		{name: "job list", exec: "gpu: [1, 2]", opened: []int{1, 2}},
		{name: "env", args: []string{"env:IMGPIPE_GPU=all"}, opened: []int{0, 1, 2}},
		{name: "no such GPU in the list", args: []string{"--gpu", "0,1,5"}, opened: []int{0, 1}, code: exitFatal,
			want: "no GPU 4: the driver sees 2 GPUs"}, // noSuchGPUErr's text
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opened, closed := fakeGPUs(t, 3)
			out := filepath.Join(t.TempDir(), "out")
			code, _, stderr := cli(t, append(gpuRunArgs(t, in, out, tt.exec), withEnv(t, tt.args)...)...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d with %q", code, stderr, tt.code, tt.want)
			}
			if got := opened(); !slices.Equal(got, tt.opened) {
				t.Errorf("opened %v, want %v", got, tt.opened)
			}
			if got, want := closed(), opened(); len(got) != len(want) {
				t.Errorf("closed %v, opened %v", got, want)
			}
			if code != exitOK {
				return
			}
			_, sum := readReport(t, filepath.Join(out, folderrun.ReportName))
			var names []string
			for _, o := range tt.opened {
				names = append(names, fmt.Sprintf("GPU %d", o))
			}
			if sum.Device != strings.Join(names, ", ") || sum.OK != 2 {
				t.Errorf("summary %+v", sum)
			}
			if len(tt.opened) > 1 && len(sum.GPUs) != len(tt.opened) || len(tt.opened) == 1 && sum.GPUs != nil {
				t.Errorf("per-GPU figures %+v for %d GPUs", sum.GPUs, len(tt.opened))
			}
		})
	}
}

// --gpu all on a host where no GPU works: auto runs on the CPU saying why, cuda fails.
func TestRunAllGPUsWithoutAGPU(t *testing.T) {
	in := smallFolder(t)
	setOpenDevice(t, func(int) (sched.Device, func() error, error) {
		t.Error("a GPU was opened")
		return nil, nil, errors.New("unreachable")
	})
	old := listDevices
	t.Cleanup(func() { listDevices = old })
	for _, tt := range []struct {
		list   func() ([]cudastage.DeviceInfo, error)
		device string
		code   int
		want   string
	}{
		{func() ([]cudastage.DeviceInfo, error) { return nil, nil }, "auto", exitOK, "no usable GPU (the CUDA driver reports no device); running on the CPU"},
		{func() ([]cudastage.DeviceInfo, error) { return nil, nil }, "cuda", exitFatal, "--device cuda: no usable GPU: the CUDA driver reports no device"},
		{func() ([]cudastage.DeviceInfo, error) { return nil, errors.New("libcuda.so.1: not found") }, "cuda", exitFatal, "libcuda.so.1: not found"},
	} {
		t.Run(tt.device+" "+tt.want, func(t *testing.T) {
			listDevices = tt.list
			code, _, stderr := cli(t, "run", "-i", in, "-o", filepath.Join(t.TempDir(), "out"), "-p", "decode | grayscale | save",
				"--quiet", "--device", tt.device, "--gpu", "all")
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}

// bench raw --gpu all measures each configuration on GPU 0 alone, then on every GPU at
// once, checked against the CPU chain on each, and gives the scaling.
func TestBenchRawSeveralGPUs(t *testing.T) {
	opened, closed := fakeGPUs(t, 3)
	smallCopyLimit(t)
	code, stdout, stderr := benchCLI(t, t.Context(), "bench", "raw", "--size", "16x8", "--frames", "8", "--repeats", "2", "--warmup", "0",
		"--device", "cuda", "--gpu", "all", "--batch", "2", "--no-cpu", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !slices.Equal(opened(), []int{0, 1, 2}) || len(closed()) != 3 {
		t.Errorf("opened %v, closed %v", opened(), closed())
	}
	recs := records(t, stdout)
	if len(recs) != 2 {
		t.Fatalf("%d records, want GPU 0's and all three's:\n%s", len(recs), stdout)
	}
	one, all := recs[0], recs[1]
	checkSchema(t, all)
	if one["device"] != "GPU 0" || one["gpus"] != nil || one["scaling_vs_one_gpu"] != nil {
		t.Errorf("one GPU's record: %v", one)
	}
	if all["device"] != "GPU 0, GPU 1, GPU 2" || all["gpus"] != 3.0 || all["frames"] != 24.0 || all["exact"] != true ||
		all["scaling_vs_one_gpu"] == nil || all["scaling_vs_one_gpu"].(float64) <= 0 {
		t.Errorf("all GPUs' record: %v", all)
	}
}
