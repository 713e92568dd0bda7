package cudastage

import (
	"errors"
	"fmt"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
)

func TestOrdinalError(t *testing.T) {
	tests := []struct {
		ordinal, n int
		visible    string
		want       string
	}{
		{1, 1, "", "cudastage: no GPU 1: the driver sees 1 GPU, numbered 0"},
		{8, 2, "", "cudastage: no GPU 8: the driver sees 2 GPUs, numbered 0 to 1"},
		{2, 2, "3,5", "cudastage: no GPU 2: the driver sees 2 GPUs, numbered 0 to 1 (CUDA_VISIBLE_DEVICES=3,5 selects and renumbers them)"},
		{0, 0, "", "cudastage: no GPU 0: the driver sees no GPU"},
	}
	for _, tt := range tests {
		err := ordinalError(tt.ordinal, tt.n, tt.visible)
		if err.Error() != tt.want {
			t.Errorf("ordinalError(%d, %d, %q) = %q, want %q", tt.ordinal, tt.n, tt.visible, err, tt.want)
		}
		if !errors.Is(err, ErrNoSuchGPU) {
			t.Errorf("ordinalError(%d, %d, %q) does not wrap ErrNoSuchGPU", tt.ordinal, tt.n, tt.visible)
		}
	}
}

// A negative ordinal is wrong on every machine, so it is refused whether or not a driver
// loads, and never mistaken for "no GPU usable".
func TestOpenGPUNegativeOrdinal(t *testing.T) {
	_, err := OpenGPU(-1)
	if !errors.Is(err, ErrNoSuchGPU) || errors.Is(err, cu.ErrNoDriver) || err.Error() != "cudastage: no GPU -1: GPU ordinals count from 0" {
		t.Errorf("OpenGPU(-1) = %v, want ErrNoSuchGPU saying ordinals count from 0", err)
	}
}

// On a machine with a GPU, an ordinal past the last device wraps ErrNoSuchGPU, found in the
// background: calls fail with it, and Close has nothing to release. Without a GPU, the
// reason is the missing driver or device, not the ordinal.
func TestOpenGPUOrdinalOutOfRange(t *testing.T) {
	err := openErr(1 << 20)
	if err == nil {
		t.Fatal("OpenGPU(1<<20) found a device")
	}
	if cu.Load() == nil {
		if !errors.Is(err, ErrNoSuchGPU) {
			t.Errorf("OpenGPU(1<<20) = %v, want ErrNoSuchGPU", err)
		}
		return
	}
	if errors.Is(err, ErrNoSuchGPU) {
		t.Errorf("OpenGPU(1<<20) without a GPU = %v, want the driver's reason", err)
	}
}

// openErr opens GPU ordinal as Open does and returns why it could not be: OpenGPU's error,
// or the one found in the background, which every call that needs the device returns.
func openErr(ordinal int) error {
	d, closeDev, err := Open(ordinal)
	if err != nil {
		return err
	}
	err = d.OpenErr()
	if bindErr := d.BindThread(); !errors.Is(bindErr, err) {
		return fmt.Errorf("BindThread = %v, OpenErr %w", bindErr, err)
	}
	if cerr := closeDev(); cerr != nil {
		return fmt.Errorf("close = %v, OpenErr %w", cerr, err)
	}
	return err
}
