package cu

import (
	"errors"
	"fmt"
)

// Sentinel errors for the reasons a GPU cannot be used at all. Load (and so
// every call) wraps one of them, so callers can tell the user why with
// errors.Is.
var (
	// ErrNoDriver: libcuda.so.1 cannot be loaded (no NVIDIA driver).
	ErrNoDriver = errors.New("CUDA driver library libcuda.so.1 not found")
	// ErrNoDevice: the driver loaded but sees no CUDA device.
	ErrNoDevice = errors.New("no CUDA device")
	// ErrDriverTooOld: the driver is older than MinDriverVersion or lacks a
	// symbol this package needs.
	ErrDriverTooOld = errors.New("CUDA driver too old")
)

// Result codes of the driver (CUresult) that callers test for. The full list
// is in cuda.h; Error carries whatever the driver returned.
const (
	Success                    = 0
	ErrorInvalidValue          = 1
	ErrorOutOfMemory           = 2
	ErrorNotInitialized        = 3
	ErrorDeinitialized         = 4
	ErrorNoDevice              = 100
	ErrorInvalidDevice         = 101
	ErrorInvalidImage          = 200
	ErrorInvalidContext        = 201
	ErrorNoBinaryForGPU        = 209
	ErrorECCUncorrectable      = 214
	ErrorInvalidPTX            = 218
	ErrorUnsupportedPTXVersion = 222
	ErrorNVLinkUncorrectable   = 220
	ErrorInvalidHandle         = 400
	ErrorNotFound              = 500
	ErrorNotReady              = 600
	ErrorIllegalAddress        = 700
	ErrorLaunchOutOfResources  = 701
	ErrorLaunchTimeout         = 702
	ErrorAssert                = 710
	ErrorHardwareStackError    = 714
	ErrorIllegalInstruction    = 715
	ErrorMisalignedAddress     = 716
	ErrorInvalidAddressSpace   = 717
	ErrorInvalidPC             = 718
	ErrorLaunchFailed          = 719
	ErrorUnknown               = 999
)

// codeNames names the codes above for when the driver cannot (no library, or
// cuGetErrorName fails), so errors stay readable.
var codeNames = map[int]string{
	ErrorInvalidValue:          "CUDA_ERROR_INVALID_VALUE",
	ErrorOutOfMemory:           "CUDA_ERROR_OUT_OF_MEMORY",
	ErrorNotInitialized:        "CUDA_ERROR_NOT_INITIALIZED",
	ErrorDeinitialized:         "CUDA_ERROR_DEINITIALIZED",
	ErrorNoDevice:              "CUDA_ERROR_NO_DEVICE",
	ErrorInvalidDevice:         "CUDA_ERROR_INVALID_DEVICE",
	ErrorInvalidImage:          "CUDA_ERROR_INVALID_IMAGE",
	ErrorInvalidContext:        "CUDA_ERROR_INVALID_CONTEXT",
	ErrorNoBinaryForGPU:        "CUDA_ERROR_NO_BINARY_FOR_GPU",
	ErrorECCUncorrectable:      "CUDA_ERROR_ECC_UNCORRECTABLE",
	ErrorInvalidPTX:            "CUDA_ERROR_INVALID_PTX",
	ErrorUnsupportedPTXVersion: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	ErrorNVLinkUncorrectable:   "CUDA_ERROR_NVLINK_UNCORRECTABLE",
	ErrorInvalidHandle:         "CUDA_ERROR_INVALID_HANDLE",
	ErrorNotFound:              "CUDA_ERROR_NOT_FOUND",
	ErrorNotReady:              "CUDA_ERROR_NOT_READY",
	ErrorIllegalAddress:        "CUDA_ERROR_ILLEGAL_ADDRESS",
	ErrorLaunchOutOfResources:  "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	ErrorLaunchTimeout:         "CUDA_ERROR_LAUNCH_TIMEOUT",
	ErrorAssert:                "CUDA_ERROR_ASSERT",
	ErrorHardwareStackError:    "CUDA_ERROR_HARDWARE_STACK_ERROR",
	ErrorIllegalInstruction:    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	ErrorMisalignedAddress:     "CUDA_ERROR_MISALIGNED_ADDRESS",
	ErrorInvalidAddressSpace:   "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	ErrorInvalidPC:             "CUDA_ERROR_INVALID_PC",
	ErrorLaunchFailed:          "CUDA_ERROR_LAUNCH_FAILED",
	ErrorUnknown:               "CUDA_ERROR_UNKNOWN",
}

// stickyCodes are the errors after which the CUDA context is corrupt: the
// driver documents that "the context cannot be used anymore, and must be
// destroyed" (in practice: the process must stop using the device).
var stickyCodes = map[int]bool{
	ErrorECCUncorrectable:    true,
	ErrorNVLinkUncorrectable: true,
	ErrorIllegalAddress:      true,
	ErrorLaunchTimeout:       true,
	ErrorAssert:              true,
	ErrorHardwareStackError:  true,
	ErrorIllegalInstruction:  true,
	ErrorMisalignedAddress:   true,
	ErrorInvalidAddressSpace: true,
	ErrorInvalidPC:           true,
	ErrorLaunchFailed:        true,
}

// Error is a failed driver call.
type Error struct {
	Call string // driver function, without its _v2 suffix, e.g. "cuMemAlloc"
	Code int    // CUresult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg  string // the driver's description, e.g. "out of memory"
}

// Error formats as "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory".
func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = fmt.Sprintf("CUDA error %d", e.Code)
	}
	if e.Msg == "" {
		return e.Call + ": " + name
	}
	return e.Call + ": " + name + ": " + e.Msg
}

// Sticky reports whether the error leaves the context unusable (illegal
// address, launch failure, hardware exception, ...). Such an error is fatal
// for the device: every later call fails the same way, so retrying is
// pointless and waiting on the device must stop.
func (e *Error) Sticky() bool { return stickyCodes[e.Code] }

// IsSticky reports whether err wraps a sticky *Error.
func IsSticky(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Sticky()
}

// IsOutOfMemory reports whether err wraps CUDA_ERROR_OUT_OF_MEMORY.
func IsOutOfMemory(err error) bool { return HasCode(err, ErrorOutOfMemory) }

// HasCode reports whether err wraps an *Error with the given CUresult.
func HasCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// newError builds the Error for a failed call, asking the driver for the
// name and description when it is loaded.
func newError(d *driver, call string, code int) *Error {
	e := &Error{Call: call, Code: code, Name: codeNames[code]}
	if d != nil {
		if n := d.errorName(code); n != "" {
			e.Name = n
		}
		e.Msg = d.errorString(code)
	}
	return e
}
