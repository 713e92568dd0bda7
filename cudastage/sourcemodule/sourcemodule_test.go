package sourcemodule

import (
	"errors"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
	"github.com/imgpipe/imgpipe/memory/devmem"
	"github.com/imgpipe/imgpipe/memory/pinned"
)

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name    string
		ordinal int
		cfg     Config
		want    string
		is      error
	}{
		{"negative ordinal", -1, Config{}, "ordinals count from 0", cudastage.ErrNoSuchGPU},
		{"negative host budget", 0, Config{HostBytes: -1}, "negative budget", nil},
		{"negative device budget", 0, Config{DeviceBytes: -1}, "negative budget", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Open(tt.ordinal, tt.cfg)
			if err == nil {
				c.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// fakeBuffer is a DeviceBuffer of c at address p, without a device.
func fakeBuffer(c *Context, p devmem.Ptr) *DeviceBuffer {
	return &DeviceBuffer{blk: &devmem.Block{Ptr: p}, c: c}
}

func TestValues(t *testing.T) {
	c, other := &Context{}, &Context{}
	freed := fakeBuffer(c, 0x2000)
	freed.blk = nil
	tests := []struct {
		name string
		args []Arg
		want []any // *uint64, *int32 or *float32 values
		err  string
	}{
		{"none", nil, []any{}, ""},
		{"scalars", []Arg{Int(-3), Float(1.5), Scalar(userkernel.Scalar{I: 7}), Scalar(userkernel.Scalar{Float: true, F: 2})},
			[]any{int32(-3), float32(1.5), int32(7), float32(2)}, ""},
		{"pointer then int", []Arg{Ptr(fakeBuffer(c, 0x1000)), Int(10)}, []any{uint64(0x1000), int32(10)}, ""},
		{"freed buffer", []Arg{Int(1), Ptr(freed)}, nil, "argument 2: sourcemodule: device buffer is nil or freed"},
		{"nil buffer", []Arg{Ptr(nil)}, nil, "argument 1:"},
		{"other context", []Arg{Ptr(fakeBuffer(other, 0x1000))}, nil, "another context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals, err := c.values(tt.args)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(vals) != len(tt.want) {
				t.Fatalf("%d values, want %d", len(vals), len(tt.want))
			}
			for i, v := range vals {
				var got any
				switch p := v.(type) {
				case *uint64:
					got = *p
				case *int32:
					got = *p
				case *float32:
					got = *p
				default:
					t.Fatalf("value %d is %T", i, v)
				}
				if got != tt.want[i] {
					t.Errorf("value %d = %v (%T), want %v (%T)", i, got, got, tt.want[i], tt.want[i])
				}
			}
		})
	}
}

// Launch's checks come before any driver call.
func TestLaunchChecks(t *testing.T) {
	c := &Context{}
	f := &Function{m: &Module{c: c}, name: "k", maxBlock: 256}
	freed := fakeBuffer(c, 0x1000)
	freed.blk = nil
	tests := []struct {
		name        string
		grid, block [3]uint32
		args        []Arg
		want        string
	}{
		{"zero grid", [3]uint32{0, 1, 1}, [3]uint32{32, 1, 1}, nil, "at least 1"},
		{"zero block z", [3]uint32{1, 1, 1}, [3]uint32{32, 1, 0}, nil, "at least 1"},
		{"block too large", [3]uint32{1, 1, 1}, [3]uint32{16, 16, 2}, nil, "512 threads; this kernel allows at most 256"},
		{"freed argument", [3]uint32{1, 1, 1}, [3]uint32{256, 1, 1}, []Arg{Ptr(freed)}, "k: argument 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.Launch(tt.grid, tt.block, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCopyArgs(t *testing.T) {
	c, other := &Context{}, &Context{}
	pool, err := pinned.New(1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	host := func(cc *Context, n int) *HostBuffer {
		b, err := pool.GetExact(t.Context(), n)
		if err != nil {
			t.Fatal(err)
		}
		return &HostBuffer{buf: b, c: cc}
	}
	dev := func(n uint64) *DeviceBuffer {
		a, err := devmem.New(fakeDriver{}, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b, err := a.Alloc(n, 0)
		if err != nil {
			t.Fatal(err)
		}
		return &DeviceBuffer{blk: b, c: c}
	}
	tests := []struct {
		name string
		d    *DeviceBuffer
		h    *HostBuffer
		want string
	}{
		{"ok", dev(64), host(c, 64), ""},
		{"sizes differ", dev(64), host(c, 60), "60 host bytes and 64 device bytes"},
		{"nil host", dev(64), nil, "host buffer is nil or freed"},
		{"freed host", dev(64), &HostBuffer{c: c}, "host buffer is nil or freed"},
		{"host of another context", dev(64), host(other, 64), "host buffer of another context"},
		{"freed device", &DeviceBuffer{c: c}, host(c, 64), "device buffer is nil or freed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, b, err := c.copyArgs(tt.d, tt.h)
			if tt.want == "" {
				if err != nil || p != 0x1000 || len(b) != 64 {
					t.Errorf("got %#x, %d bytes, %v", p, len(b), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// fakeDriver hands out address 0x1000 for every allocation.
type fakeDriver struct{}

func (fakeDriver) MemAlloc(uint64) (devmem.Ptr, error) { return 0x1000, nil }
func (fakeDriver) MemFree(devmem.Ptr) error            { return nil }
func (fakeDriver) IsOutOfMemory(error) bool            { return false }

func TestFreeTwice(t *testing.T) {
	pool, err := pinned.New(1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	b, err := pool.Get(t.Context(), 16)
	if err != nil {
		t.Fatal(err)
	}
	c := &Context{host: pool}
	h := &HostBuffer{buf: b, c: c}
	if err := h.Free(); err != nil {
		t.Fatal(err)
	}
	if err := h.Free(); err == nil || !strings.Contains(err.Error(), "freed twice") {
		t.Errorf("second host Free: %v", err)
	}
	a, err := devmem.New(fakeDriver{}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := a.Alloc(8, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.mem = a
	d := &DeviceBuffer{blk: blk, c: c}
	if err := d.Free(); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(); err == nil || !strings.Contains(err.Error(), "freed twice") {
		t.Errorf("second device Free: %v", err)
	}
}

func TestFloat32s(t *testing.T) {
	for _, n := range []int{0, 3, 4, 10, 64} {
		b := make([]byte, n+8)
		got := float32s(b[:n])
		if len(got) != n/4 {
			t.Errorf("%d bytes: %d float32s, want %d", n, len(got), n/4)
		}
		if n >= 4 {
			got[0] = 1 // 0x3f800000, little endian
			if b[3] != 0x3f || b[2] != 0x80 {
				t.Errorf("float32 view does not alias the bytes: % x", b[:4])
			}
		}
	}
}
