package nvjpeg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/dynlib"
)

func TestStatusNames(t *testing.T) {
	for _, tc := range []struct {
		s    Status
		want string
		bad  bool
	}{
		{StatusSuccess, "NVJPEG_STATUS_SUCCESS", false},
		{StatusNotInitialized, "NVJPEG_STATUS_NOT_INITIALIZED", false},
		{StatusInvalidParameter, "NVJPEG_STATUS_INVALID_PARAMETER", false},
		{StatusBadJPEG, "NVJPEG_STATUS_BAD_JPEG", true},
		{StatusJPEGNotSupported, "NVJPEG_STATUS_JPEG_NOT_SUPPORTED", true},
		{StatusAllocatorFailure, "NVJPEG_STATUS_ALLOCATOR_FAILURE", false},
		{StatusExecutionFailed, "NVJPEG_STATUS_EXECUTION_FAILED", false},
		{StatusArchMismatch, "NVJPEG_STATUS_ARCH_MISMATCH", false},
		{StatusInternalError, "NVJPEG_STATUS_INTERNAL_ERROR", false},
		{StatusImplementationNotSupport, "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED", false},
		{StatusIncompleteBitstream, "NVJPEG_STATUS_INCOMPLETE_BITSTREAM", true},
		{Status(42), "NVJPEG_STATUS_42", false},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("Status(%d) = %q, want %q", int(tc.s), got, tc.want)
		}
		err := fmt.Errorf("decoding a.jpg: %w", &Error{Call: "nvjpegDecodeBatched", Status: tc.s})
		if want := "decoding a.jpg: nvjpegDecodeBatched: " + tc.want; err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
		if IsBadInput(err) != tc.bad || !HasStatus(err, tc.s) {
			t.Errorf("%s: IsBadInput %v (want %v), HasStatus %v", tc.want, IsBadInput(err), tc.bad, HasStatus(err, tc.s))
		}
	}
	if IsBadInput(errors.New("other")) || HasStatus(errors.New("other"), StatusSuccess) {
		t.Error("a plain error matched")
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{BackendGPUHybrid.String(), "NVJPEG_BACKEND_GPU_HYBRID"},
		{BackendHardware.String(), "NVJPEG_BACKEND_HARDWARE"},
		{Backend(0).String(), "NVJPEG_BACKEND_0"},
		{Sub444.String(), "4:4:4"},
		{Sub420.String(), "4:2:0"},
		{SubGray.String(), "gray"},
		{Subsampling(1).String(), "subsampling(1)"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}

func TestBatchCapacity(t *testing.T) {
	for _, tc := range []struct{ engines, cores, want int }{
		{0, 0, 0}, {0, 5, 0}, {1, 0, imagesPerCore}, {7, 5, 7 * 5 * imagesPerCore}, {1, 1, imagesPerCore},
	} {
		if got := BatchCapacity(tc.engines, tc.cores); got != tc.want {
			t.Errorf("BatchCapacity(%d, %d) = %d, want %d", tc.engines, tc.cores, got, tc.want)
		}
	}
}

func TestCheckEncode(t *testing.T) {
	pix := make([]byte, 4*3*3)
	for _, tc := range []struct {
		name                     string
		pix                      []byte
		w, h, c, stride, quality int
		want                     string
	}{
		{"ok rgb", pix, 4, 3, 3, 12, 90, ""},
		{"ok gray, padded rows", pix, 4, 3, 1, 12, 1, ""},
		{"ok 1x1", pix[:3], 1, 1, 3, 3, 100, ""},
		{"channels", pix, 4, 3, 4, 16, 90, "4 channels"},
		{"zero width", pix, 0, 3, 3, 12, 90, "size 0x3"},
		{"too tall", pix, 1, 65536, 1, 1, 90, "size 1x65536"},
		{"stride", pix, 4, 3, 3, 11, 90, "stride 11"},
		{"short pixels", pix[:35], 4, 3, 3, 12, 90, "35 bytes of pixels"},
		{"quality 0", pix, 4, 3, 3, 12, 0, "quality 0"},
		{"quality 101", pix, 4, 3, 3, 12, 101, "quality 101"},
	} {
		err := checkEncode(tc.pix, tc.w, tc.h, tc.c, tc.stride, tc.quality)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestOpenErrors: a library that is not nvJPEG, or none at all, gives an
// error that says so; the real search (Load) is the dynlib one.
func TestOpenErrors(t *testing.T) {
	spec := func(env string) dynlib.Spec {
		s := Spec
		s.Env = "IMGPIPE_NVJPEG_TEST"
		t.Setenv(s.Env, env)
		return s
	}
	if _, err := open(spec("/lib/x86_64-linux-gnu/libm.so.6")); err == nil || !strings.Contains(err.Error(), "nvJPEG too old (CUDA 12 or newer needed)") || !strings.Contains(err.Error(), "lacks nvjpeg") {
		t.Errorf("libm as nvJPEG: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "libnvjpeg.so.13")
	if _, err := open(spec(missing)); !errors.Is(err, dynlib.ErrNotFound) || !strings.Contains(err.Error(), "nvJPEG: library not found (tried IMGPIPE_NVJPEG_TEST="+missing) {
		t.Errorf("missing file: %v", err)
	}
	text := filepath.Join(t.TempDir(), "text.so")
	if err := os.WriteFile(text, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := open(spec(text)); !errors.Is(err, dynlib.ErrNotFound) || !strings.Contains(err.Error(), text+": ") {
		t.Errorf("non-library file: %v", err)
	}
}

// TestLoadHere: on a machine without nvJPEG, Load and everything after it
// fail with the search's error, and Path is empty.
func TestLoadHere(t *testing.T) {
	err := Load()
	if err == nil {
		if Path() == "" {
			t.Error("loaded, but Path is empty")
		}
		t.Skipf("nvJPEG is here (%s)", Path())
	}
	if !strings.HasPrefix(err.Error(), "nvJPEG: ") || Path() != "" {
		t.Errorf("Load: %v, Path %q", err, Path())
	}
	if _, err2 := Version(); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("Version: %v", err2)
	}
	if _, err2 := NewHandle(BackendHardware); err2 == nil {
		t.Error("NewHandle worked without the library")
	}
}
