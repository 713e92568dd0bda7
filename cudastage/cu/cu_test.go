package cu

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

func TestErrorFormatAndSticky(t *testing.T) {
	for _, tc := range []struct {
		err    *Error
		want   string
		sticky bool
	}{
		{newError(nil, "cuMemAlloc", ErrorOutOfMemory), "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY", false},
		{&Error{Call: "cuMemAlloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Msg: "out of memory"}, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory", false},
		{newError(nil, "cuStreamSynchronize", ErrorIllegalAddress), "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS", true},
		{newError(nil, "cuCtxSynchronize", ErrorLaunchFailed), "cuCtxSynchronize: CUDA_ERROR_LAUNCH_FAILED", true},
		{newError(nil, "x", ErrorMisalignedAddress), "x: CUDA_ERROR_MISALIGNED_ADDRESS", true},
		{newError(nil, "x", ErrorIllegalInstruction), "x: CUDA_ERROR_ILLEGAL_INSTRUCTION", true},
		{newError(nil, "x", ErrorHardwareStackError), "x: CUDA_ERROR_HARDWARE_STACK_ERROR", true},
		{newError(nil, "cuLaunchKernel", ErrorInvalidValue), "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE", false},
		{newError(nil, "cuLaunchKernel", ErrorInvalidHandle), "cuLaunchKernel: CUDA_ERROR_INVALID_HANDLE", false},
		{newError(nil, "x", ErrorLaunchOutOfResources), "x: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", false},
		{newError(nil, "x", 12345), "x: CUDA error 12345", false},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if tc.err.Sticky() != tc.sticky {
			t.Errorf("%s: Sticky() = %v", tc.want, !tc.sticky)
		}
		wrapped := errors.Join(errors.New("batch 3"), tc.err)
		if IsSticky(wrapped) != tc.sticky || !HasCode(wrapped, tc.err.Code) {
			t.Errorf("%s: IsSticky/HasCode do not see through wrapping", tc.want)
		}
	}
	if IsSticky(errors.New("plain")) || IsOutOfMemory(nil) {
		t.Error("non-CUDA errors are neither sticky nor OOM")
	}
}

func TestVersionString(t *testing.T) {
	for v, want := range map[int]string{13000: "13.0", 12040: "12.4", 11080: "11.8", 12000: "12.0"} {
		if got := VersionString(v); got != want {
			t.Errorf("VersionString(%d) = %q, want %q", v, got, want)
		}
	}
}

// TestLoadHere checks that Load either works or says why, on whatever machine
// runs the tests.
func TestLoadHere(t *testing.T) {
	err := Load()
	if err == nil {
		return
	}
	if !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrNoDevice) && !errors.Is(err, ErrDriverTooOld) {
		t.Errorf("Load() = %v: wraps none of ErrNoDriver, ErrNoDevice, ErrDriverTooOld", err)
	}
	if _, err2 := MemAlloc(1); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("calls without a driver should return Load's error, got %v", err2)
	}
	t.Logf("no GPU here: %v", err)
}

func TestOpenMissingLibrary(t *testing.T) {
	_, err := open("/nonexistent/libcuda.so.1")
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "libcuda.so.1 not found") {
		t.Errorf("open(missing) = %v, want ErrNoDriver", err)
	}
}

func TestPinnedRegistry(t *testing.T) {
	// Synthetic spans: the registry is only arithmetic on addresses.
	buf := make([]byte, 3000)
	base := uintptr(unsafe.Pointer(&buf[0]))
	addPinned(span{base: base + 1000, end: base + 2000, mapped: 1000})
	defer removePinned(base + 1000)
	for _, tc := range []struct {
		lo, hi int
		want   bool
	}{
		{1000, 2000, true}, {1500, 1600, true}, {1999, 2000, true},
		{999, 1500, false}, {1500, 2001, false}, {0, 10, false}, {2000, 2100, false},
	} {
		if got := IsPinned(buf[tc.lo:tc.hi]); got != tc.want {
			t.Errorf("IsPinned(buf[%d:%d]) = %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
	if IsPinned(nil) || IsPinned(buf[1000:1000]) {
		t.Error("empty slices are not pinned")
	}
	if _, ok := removePinned(base + 1001); ok {
		t.Error("removePinned of an interior address succeeded")
	}
}

func TestParamChecks(t *testing.T) {
	var (
		p   DevicePtr = 1
		u32 uint32
		f32 float32
		arr [4]int32
		st  struct {
			A int32
			B float32
		}
		n    int
		sl   []byte
		ptr  *byte
		nilp *uint32
	)
	for _, ok := range []any{&p, &u32, &f32, &arr, &st} {
		if _, err := paramPointer(ok); err != nil {
			t.Errorf("%T refused: %v", ok, err)
		}
	}
	for _, bad := range []any{p, &n, &sl, &ptr, nilp, nil, "s"} {
		if _, err := paramPointer(bad); err == nil {
			t.Errorf("%T accepted", bad)
		}
	}
}

var (
	fakeOnce sync.Once
	fakePath string
	fakeErr  error
)

// fakeLib builds testdata/fakecuda.c into a shared library, once.
func fakeLib(t *testing.T) string {
	t.Helper()
	fakeOnce.Do(func() {
		cc, err := exec.LookPath("cc")
		if err != nil {
			fakeErr = err
			return
		}
		dir, err := mkdirTemp()
		if err != nil {
			fakeErr = err
			return
		}
		fakePath = filepath.Join(dir, "libfakecuda.so")
		out, err := exec.Command(cc, "-shared", "-fPIC", "-O", "-o", fakePath, "testdata/fakecuda.c").CombinedOutput()
		if err != nil {
			fakeErr = errors.New(string(out))
		}
	})
	if fakeErr != nil {
		t.Skipf("cannot build the fake libcuda (needs a C compiler): %v", fakeErr)
	}
	return fakePath
}

// fakeCall calls a helper function exported by the fake library.
func fakeCall(t *testing.T, name string, args ...uintptr) {
	t.Helper()
	h, err := purego.Dlopen(fakeLib(t), purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := purego.Dlsym(h, name)
	if err != nil {
		t.Fatal(err)
	}
	purego.SyscallN(fn, args...)
}

func TestOpenFake(t *testing.T) {
	path := fakeLib(t)
	for _, tc := range []struct {
		name                 string
		version, init, count int
		want                 error
		msg                  string
	}{
		{"too old", 11040, 0, 1, ErrDriverTooOld, "driver supports CUDA 11.4, imgpipe needs CUDA 12.0 or newer"},
		{"no device at init", 13000, 100, 0, ErrNoDevice, "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"},
		{"zero devices", 12080, 0, 0, ErrNoDevice, "sees 0 devices"},
		{"ok", 13000, 0, 2, nil, ""},
	} {
		fakeCall(t, "fake_config", uintptr(tc.version), uintptr(tc.init), uintptr(tc.count))
		d, err := open(path)
		if tc.want == nil {
			if err != nil || d == nil {
				t.Errorf("%s: open = %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: open = %v, want %v containing %q", tc.name, err, tc.want, tc.msg)
		}
	}
}

// withFake makes the fake library the package's driver for one test, and
// puts the real state back afterwards (GPU tests share the test binary).
func withFake(t *testing.T) {
	path := fakeLib(t)
	fakeCall(t, "fake_config", 13000, 0, 2)
	d, err := open(path)
	if err != nil {
		t.Fatal(err)
	}
	get() // settle the real Load first, so the swap is not undone by it
	saved, savedErr := loaded, loadErr
	loaded, loadErr = d, nil
	t.Cleanup(func() { loaded, loadErr = saved, savedErr })
}

func TestBindingWithFake(t *testing.T) {
	withFake(t)
	if v, err := DriverVersion(); err != nil || v != 13000 {
		t.Errorf("DriverVersion = %d, %v", v, err)
	}
	if n, err := DeviceCount(); err != nil || n != 2 {
		t.Errorf("DeviceCount = %d, %v", n, err)
	}
	dev, err := DeviceGet(1)
	if err != nil || dev != 1 {
		t.Fatalf("DeviceGet(1) = %d, %v", dev, err)
	}
	if _, err := DeviceGet(5); !HasCode(err, ErrorInvalidDevice) {
		t.Errorf("DeviceGet(5) = %v", err)
	}
	if name, err := dev.Name(); err != nil || name != "Fake GPU" {
		t.Errorf("Name = %q, %v", name, err)
	}
	if major, minor, err := dev.ComputeCapability(); err != nil || major != 75001 || minor != 76001 {
		t.Errorf("ComputeCapability = %d.%d, %v (attribute codes not passed through)", major, minor, err)
	}
	if mem, err := dev.TotalMem(); err != nil || mem != 80<<30 {
		t.Errorf("TotalMem = %d, %v", mem, err)
	}
	if s, err := StreamCreate(true); err != nil || s != 0x5001 {
		t.Errorf("StreamCreate(nonBlocking) = %#x, %v", s, err)
	}
	if done, err := Stream(0x5000).Query(); err != nil || done {
		t.Errorf("Stream.Query = %v, %v: want not ready", done, err)
	}
	if e, err := EventCreate(false); err != nil || e != 0xe002 {
		t.Errorf("EventCreate(no timing) = %#x, %v", e, err)
	}
	if ms, err := ElapsedTime(1, 2); err != nil || ms != 1.5 {
		t.Errorf("ElapsedTime = %v, %v", ms, err)
	}

	err = CtxSynchronize()
	var ce *Error
	if !errors.As(err, &ce) || !ce.Sticky() || err.Error() != "cuCtxSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered" {
		t.Errorf("CtxSynchronize = %v, want a sticky illegal address", err)
	}

	_, err = MemAlloc(1 << 50)
	if !IsOutOfMemory(err) || err.Error() != "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory" {
		t.Errorf("MemAlloc(1<<50) = %v", err)
	}
	if _, err := MemAlloc(0); err == nil {
		t.Error("MemAlloc(0) succeeded")
	}
}

func TestCopiesWithFake(t *testing.T) {
	withFake(t)
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 1<<16)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	p, err := MemAlloc(uint64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	defer MemFree(p)
	if err := MemcpyHtoD(p, src); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, len(src))
	if err := MemcpyDtoH(dst, p); err != nil || !bytes.Equal(dst, src) {
		t.Fatalf("sync round trip: %v, equal %v", err, bytes.Equal(dst, src))
	}

	// Async copies need pinned memory and refuse Go memory.
	h, err := MemHostAlloc(len(src))
	if err != nil {
		t.Fatal(err)
	}
	if !IsPinned(h) || !IsPinned(h[100:200]) {
		t.Fatal("MemHostAlloc memory not registered as pinned")
	}
	if err := MemcpyHtoDAsync(p, src, 0); err == nil || !strings.Contains(err.Error(), "not from MemHostAlloc") {
		t.Errorf("async copy from Go memory = %v, want refusal", err)
	}
	if err := MemcpyDtoHAsync(dst, p, 0); err == nil {
		t.Error("async copy into Go memory accepted")
	}
	if err := MemsetD8Async(p, 0x5a, 10, 0); err != nil {
		t.Fatal(err)
	}
	if err := MemcpyDtoHAsync(h, p, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h[:10], bytes.Repeat([]byte{0x5a}, 10)) || !bytes.Equal(h[10:], src[10:]) {
		t.Error("memset + async D2H gave wrong bytes")
	}
	q, _ := MemAlloc(uint64(len(src)))
	defer MemFree(q)
	if err := MemcpyDtoDAsync(q, p, uint64(len(src)), 0); err != nil {
		t.Fatal(err)
	}
	clear(h)
	if err := MemcpyDtoHAsync(h, q, 0); err != nil || !bytes.Equal(h[10:], src[10:]) {
		t.Errorf("DtoD copy: %v", err)
	}

	if err := MemFreeHost(src); err == nil {
		t.Error("MemFreeHost of Go memory accepted")
	}
	if err := MemFreeHost(h[1:]); err == nil {
		t.Error("MemFreeHost of an interior slice accepted")
	}
	if err := MemFreeHost(h); err != nil {
		t.Fatal(err)
	}
	if IsPinned(h) {
		t.Error("freed memory still registered as pinned")
	}
	if err := MemFreeHost(h); err == nil {
		t.Error("double MemFreeHost accepted")
	}
	// More than the machine has is refused before anything is mapped or locked.
	if _, err := MemHostAlloc(int(min(physicalMemory(), 1<<60)) + 1); err == nil || !IsOutOfMemory(err) {
		t.Errorf("MemHostAlloc(more than RAM) = %v, want out of memory", err)
	}
}

func TestMapHost(t *testing.T) {
	page := uintptr(unix.Getpagesize())
	for _, tc := range []struct {
		n           uintptr
		align, size uintptr // the mapping's alignment and length
	}{
		{1, page, page},
		{page + 1, page, 2 * page},
		{hugePage - 1, page, hugePage},
		{hugePage, hugePage, hugePage},
		{hugePage + 1, hugePage, 2 * hugePage},
		{5*hugePage + 12345, hugePage, 6 * hugePage},
	} {
		p, mapped, err := mapHost(tc.n)
		if err != nil {
			t.Fatalf("mapHost(%d): %v", tc.n, err)
		}
		if uintptr(p)%tc.align != 0 || mapped != tc.size {
			t.Errorf("mapHost(%d) = %p, %d mapped; want aligned to %d, %d mapped", tc.n, p, mapped, tc.align, tc.size)
		}
		b := unsafe.Slice((*byte)(p), mapped)
		if b[0] != 0 || b[len(b)-1] != 0 {
			t.Errorf("mapHost(%d): memory not zeroed", tc.n)
		}
		b[0], b[len(b)-1] = 1, 1 // the whole mapping is writable
		if err := unix.MunmapPtr(p, mapped); err != nil {
			t.Errorf("mapHost(%d): unmapping: %v", tc.n, err)
		}
	}
}

func TestModuleAndLaunchWithFake(t *testing.T) {
	withFake(t)
	_, err := ModuleLoadData([]byte("bad ptx"))
	if !HasCode(err, ErrorInvalidPTX) || !strings.Contains(err.Error(), "ptxas fatal: syntax error") {
		t.Errorf("ModuleLoadData(bad) = %v, want the JIT log in the error", err)
	}
	if _, err := ModuleLoadData(nil); err == nil {
		t.Error("empty image accepted")
	}
	m, err := ModuleLoadData([]byte(".version 7.0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Function("nope"); !HasCode(err, ErrorNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Function(nope) = %v", err)
	}
	f, err := m.Function("k")
	if err != nil {
		t.Fatal(err)
	}
	ptr := DevicePtr(0x1122334455667788)
	n := uint32(0xdeadbeef)
	x := float32(2.5)
	if err := LaunchKernel(f, [3]uint32{7, 8, 9}, [3]uint32{32, 4, 2}, 4096, Stream(0x5001), &ptr, &n, &x); err != nil {
		t.Fatal(err)
	}
	var got [16]uint64
	fakeCall(t, "fake_last_launch", uintptr(unsafe.Pointer(&got[0])))
	want := [13]uint64{0x4000, 7, 8, 9, 32, 4, 2, 4096, 0x5001, 0, 0x1122334455667788, 0xdeadbeef, uint64(0x40200000)}
	if [13]uint64(got[:13]) != want {
		t.Errorf("launch arguments as seen by the driver:\n got %#x\nwant %#x", got[:13], want)
	}
	err = LaunchKernel(f, [3]uint32{1, 1, 1}, [3]uint32{2048, 1, 1}, 0, 0, &ptr, &n, &x)
	if !HasCode(err, ErrorInvalidValue) || IsSticky(err) {
		t.Errorf("oversized block = %v, want a non-sticky INVALID_VALUE", err)
	}
	var bad int
	if err := LaunchKernel(f, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, 0, &bad); err == nil || !strings.Contains(err.Error(), "argument 0") {
		t.Errorf("int argument = %v, want refusal", err)
	}
	if err := LaunchKernel(0, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, 0); !HasCode(err, ErrorInvalidHandle) || IsSticky(err) {
		t.Errorf("nil function = %v", err)
	}
}

// open loads the driver library at path and initialises it, as Load does with
// libcuda.so.1.
func open(path string) (*driver, error) {
	d, err := openLib(path)
	if err != nil {
		return nil, err
	}
	if err := d.init(); err != nil {
		return nil, err
	}
	return d, nil
}
