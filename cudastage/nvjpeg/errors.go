package nvjpeg

import (
	"errors"
	"fmt"
)

// Status is an nvjpegStatus_t.
type Status int

// The statuses of nvjpeg.h that callers test for.
const (
	StatusSuccess                  Status = 0
	StatusNotInitialized           Status = 1
	StatusInvalidParameter         Status = 2
	StatusBadJPEG                  Status = 3
	StatusJPEGNotSupported         Status = 4
	StatusAllocatorFailure         Status = 5
	StatusExecutionFailed          Status = 6
	StatusArchMismatch             Status = 7
	StatusInternalError            Status = 8
	StatusImplementationNotSupport Status = 9
	StatusIncompleteBitstream      Status = 10
)

// statusNames are nvjpeg.h's names; nvJPEG has no call that returns them.
var statusNames = map[Status]string{
	StatusSuccess:                  "NVJPEG_STATUS_SUCCESS",
	StatusNotInitialized:           "NVJPEG_STATUS_NOT_INITIALIZED",
	StatusInvalidParameter:         "NVJPEG_STATUS_INVALID_PARAMETER",
	StatusBadJPEG:                  "NVJPEG_STATUS_BAD_JPEG",
	StatusJPEGNotSupported:         "NVJPEG_STATUS_JPEG_NOT_SUPPORTED",
	StatusAllocatorFailure:         "NVJPEG_STATUS_ALLOCATOR_FAILURE",
	StatusExecutionFailed:          "NVJPEG_STATUS_EXECUTION_FAILED",
	StatusArchMismatch:             "NVJPEG_STATUS_ARCH_MISMATCH",
	StatusInternalError:            "NVJPEG_STATUS_INTERNAL_ERROR",
	StatusImplementationNotSupport: "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
	StatusIncompleteBitstream:      "NVJPEG_STATUS_INCOMPLETE_BITSTREAM",
}

// String gives nvjpeg.h's name, or "NVJPEG_STATUS_<n>" for a status this
// binding does not know (a newer library).
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("NVJPEG_STATUS_%d", int(s))
}

// Error is a failed nvJPEG call.
type Error struct {
	Call   string // the nvJPEG function, e.g. "nvjpegDecodeBatched"
	Status Status
}

// Error formats as "nvjpegDecodeBatched: NVJPEG_STATUS_BAD_JPEG".
func (e *Error) Error() string { return e.Call + ": " + e.Status.String() }

// BadInput reports whether the error is about the file rather than the
// library or the device: a corrupt, truncated or unsupported stream. Such an
// error fails one image; any other fails the device.
func (e *Error) BadInput() bool {
	switch e.Status {
	case StatusBadJPEG, StatusJPEGNotSupported, StatusIncompleteBitstream:
		return true
	}
	return false
}

// IsBadInput reports whether err wraps an *Error for which BadInput holds.
func IsBadInput(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.BadInput()
}

// HasStatus reports whether err wraps an *Error with status s.
func HasStatus(err error, s Status) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == s
}
