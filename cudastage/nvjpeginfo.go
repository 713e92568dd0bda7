package cudastage

import (
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/nvjpeg"
)

// NVJPEGInfo says which nvJPEG the file decoder would use, for `imgpipe
// devices`.
type NVJPEGInfo struct {
	Path    string `json:"path,omitempty"`    // the library opened
	Version string `json:"version,omitempty"` // e.g. "13.0.1"
	Engines int    `json:"hw_engines"`        // hardware decode engines; 0 without
	Cores   int    `json:"hw_cores_per_engine"`
	// HWError says why there are no hardware engines (the hardware backend
	// could not be created: a GPU without them, an old library).
	HWError string `json:"hw_error,omitempty"`
	// Error says why nvJPEG cannot be used at all; it lists the places
	// searched when the library was not found.
	Error string `json:"error,omitempty"`
}

// String formats the info on one line.
func (n NVJPEGInfo) String() string {
	if n.Error != "" {
		return "none: " + n.Error
	}
	hw := fmt.Sprintf("%d hardware decode engines × %d cores", n.Engines, n.Cores)
	if n.HWError != "" {
		hw = "no hardware decode engines (" + n.HWError + "): JPEGs go to the CUDA decoder"
	}
	return fmt.Sprintf("%s (version %s), %s", n.Path, n.Version, hw)
}

// NVJPEG finds nvJPEG and asks it, on GPU ordinal, for its hardware engines.
func NVJPEG(ordinal int) NVJPEGInfo {
	var info NVJPEGInfo
	if err := nvjpeg.Load(); err != nil {
		info.Error = err.Error()
		return info
	}
	info.Path = nvjpeg.Path()
	v, err := nvjpeg.Version()
	if err != nil {
		info.Error = err.Error()
		return info
	}
	info.Version = v
	g, err := OpenGPU(ordinal)
	if err != nil {
		info.Error = "no GPU to run it on: " + err.Error()
		return info
	}
	defer g.Close()
	err = g.Do(func() error {
		h, err := nvjpeg.NewHandle(nvjpeg.BackendHardware)
		if err != nil {
			info.HWError = err.Error()
			return nil
		}
		defer h.Destroy()
		info.Engines, info.Cores, err = h.HardwareInfo()
		if err != nil {
			info.HWError = err.Error()
		}
		return nil
	})
	if err != nil {
		info.Error = err.Error()
	}
	return info
}
