// Package cutest decides, once per test binary, whether GPU tests can run.
//
// A GPU test starts with
//
//	ordinal := cutest.Require(t)
//
// Without a working GPU the test is skipped with the reason (no libcuda, no
// device, driver too old, ...). With IMGPIPE_REQUIRE_GPU=1 (set by the GPU
// machine's run-tests.sh) it fails instead, so a broken GPU setup cannot pass
// as a row of skips.
package cutest

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
)

// EnvRequire names the variable that turns skips into failures.
const EnvRequire = "IMGPIPE_REQUIRE_GPU"

// EnvOrdinal names the variable that picks the device (default 0). It is the CLI's
// --gpu setting too, so it may name a set: the tests run on its first GPU (0 for all).
const EnvOrdinal = "IMGPIPE_GPU"

var (
	once    sync.Once
	ordinal int
	reason  error
)

// Require returns the ordinal of the device to test on, after checking once
// that it works: the driver loads, the device exists, its primary context
// can be made current, and a small allocation succeeds. Otherwise it skips
// the test, or fails it under IMGPIPE_REQUIRE_GPU=1.
func Require(t testing.TB) int {
	t.Helper()
	once.Do(func() { ordinal, reason = probe() })
	if reason != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("GPU required (%s=1) but not usable: %v", EnvRequire, reason)
		}
		t.Skipf("no usable GPU: %v", reason)
	}
	return ordinal
}

// Required reports whether IMGPIPE_REQUIRE_GPU=1 is set.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// ordinalOf is the device the tests run on for a value of EnvOrdinal: "" and "all" mean
// 0, a list its first ordinal.
func ordinalOf(s string) (int, error) {
	if s = strings.TrimSpace(s); s == "" || s == "all" {
		return 0, nil
	}
	first, _, _ := strings.Cut(s, ",")
	n, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q is not a device ordinal, a list of them or all", EnvOrdinal, s)
	}
	return n, nil
}

func probe() (int, error) {
	ord, err := ordinalOf(os.Getenv(EnvOrdinal))
	if err != nil {
		return 0, err
	}
	if err := cu.Load(); err != nil {
		return 0, err
	}
	n, err := cu.DeviceCount()
	if err != nil {
		return 0, err
	}
	if ord >= n {
		return 0, fmt.Errorf("device %d requested (%s) but only %d present", ord, EnvOrdinal, n)
	}
	dev, err := cu.DeviceGet(ord)
	if err != nil {
		return 0, err
	}
	ctx, err := dev.PrimaryCtxRetain()
	if err != nil {
		return 0, err
	}
	defer dev.PrimaryCtxRelease()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := ctx.SetCurrent(); err != nil {
		return 0, err
	}
	p, err := cu.MemAlloc(1 << 20)
	if err != nil {
		return 0, err
	}
	if err := cu.MemFree(p); err != nil {
		return 0, err
	}
	return ord, nil
}
