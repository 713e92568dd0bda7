package gpu

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

// A GPU run's defaults are the settings' (the executor gets a complete configuration), and
// its streams and batch are checked by the table: its bounds are accepted, one past refused.
func TestGPURunDefaultsFromSettings(t *testing.T) {
	plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale"))
	if err != nil {
		t.Fatal(err)
	}
	dev := fakeGPU(t, schedtest.FakeConfig{})
	g, err := newGPURun(plan, &Options{Device: dev}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	c := g.cfg
	if c.Streams != pipeline.DefaultStreams || c.Batch != pipeline.DefaultBatch || c.Slots != DefaultSlots(pipeline.DefaultStreams) || c.Slots != pipeline.DefaultStreams+2 ||
		c.SlotBytes != DefaultSlotBytes(pipeline.DefaultBatch) || c.SlotBytes%sched.Align != 0 || c.SlotBytes < pipeline.DefaultBatch*1920*1080*3 || c.Linger != DefaultLinger {
		t.Errorf("config %+v", c)
	}
	e := pipeline.DefaultExecution()
	e.PinnedMB, e.Workers, e.MaxMemoryMB, e.OnError = 64, 3, 100, "fail"
	opt := RunOptions(e, dev)
	o, _ := opt.Backend.(*Options)
	if opt.Workers != 3 || opt.MemoryBudget != 100<<20 || !opt.StopOnError || o == nil ||
		!reflect.DeepEqual(*o, Options{Device: dev, Streams: e.Streams, Batch: e.Batch, PinnedBytes: 64 << 20, Optional: true}) {
		t.Errorf("RunOptions: %+v, GPU %+v", opt, o)
	}
	// Under device cuda a GPU that fails to open fails the run; gpu_wait waits for it.
	e.Device, e.GPUWait = "cuda", true
	if o := RunOptions(e, dev).Backend.(*Options); o.Optional || !o.Wait {
		t.Errorf("RunOptions under cuda with gpu_wait: %+v", o)
	}
	e.Device, e.GPUWait = "auto", false
	if RunOptions(pipeline.DefaultExecution()).Backend != nil {
		t.Error("RunOptions() has GPU options")
	}
	dev2 := schedtest.NewFake(schedtest.FakeConfig{})
	defer dev2.Close()
	if two, _ := RunOptions(e, dev, dev2).Backend.(*Options); two == nil || two.Device != nil || len(two.Devices) != 2 || two.PinnedBytes != 64<<20 {
		t.Errorf("RunOptions over two devices: %+v", two)
	}
	for _, name := range []string{"streams", "batch"} {
		hi := int(settingMax(name))
		for n, ok := range map[int]bool{1: true, hi: true, hi + 1: false} {
			o := &Options{Device: dev, Streams: n}
			if name == "batch" {
				o = &Options{Device: dev, Batch: n}
			}
			err := Check(plan, pipeline.Options{Backend: o})
			if ok && err != nil || !ok && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%s %d (max %d)", name, n, hi))) {
				t.Errorf("%s %d: %v", name, n, err)
			}
		}
	}
}

// hostOutFor: a slot's page-locked output is twice the share of its input that the
// chain's output takes (at most all of it), and never under hostOutFloor unless the slot
// is smaller.
func TestHostOutFor(t *testing.T) {
	slot := DefaultSlotBytes(56)
	for _, tc := range []struct {
		spec      string
		slotBytes int
		want      int
	}{
		{"resize width=256 height=256 fit=inside filter=lanczos3", slot, hostOutFloor},
		{"grayscale | blur sigma=1.5 | transpose", slot, slot * 2 / 3 &^ (sched.Align - 1)},
		{"transpose | blur", slot, slot},
		{"resize width=4000 height=4000", slot, slot},
		{"resize width=256 height=256 fit=inside", 1 << 20, 1 << 20},
	} {
		steps, err := pipeline.ParseSpec(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		ops, err := pipeline.DeviceOps(steps)
		if err != nil {
			t.Fatal(err)
		}
		if got := hostOutFor(ops, tc.slotBytes); got != tc.want {
			t.Errorf("%s, slot of %d bytes: %d bytes of page-locked output, want %d", tc.spec, tc.slotBytes, got, tc.want)
		}
	}
}
