package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// listDevices lists the GPUs for `imgpipe devices`; tests replace it.
var listDevices = cudastage.Devices

// probeNVJPEG says which nvJPEG GPU ordinal would decode with; tests replace it.
var probeNVJPEG = cudastage.NVJPEG

// probeNVRTC finds the run-time compiler for `imgpipe devices`; tests replace it.
var probeNVRTC = nvrtc.Probe

// devicesJSON is the --json output: the devices, or why there is none, nvJPEG, and NVRTC.
type devicesJSON struct {
	Devices []cudastage.DeviceInfo `json:"devices"`
	// NVJPEG is the JPEG decoder found, when there is a GPU.
	NVJPEG *cudastage.NVJPEGInfo `json:"nvjpeg,omitempty"`
	// Error says why no GPU can be used (no libcuda, no device, driver too old).
	Error string `json:"error,omitempty"`
	// NVRTC is the run-time compiler the kernel stage uses, when found.
	NVRTC *nvrtc.Info `json:"nvrtc,omitempty"`
	// NVRTCError says why NVRTC cannot be used.
	NVRTCError string `json:"nvrtc_error,omitempty"`
}

// nvrtcLine is the text output's NVRTC line.
func nvrtcLine(info *nvrtc.Info, why string) string {
	if info == nil {
		return "no NVRTC (the kernel stage cannot compile): " + why
	}
	return fmt.Sprintf("NVRTC %s (%s)", info.Version, info.Path)
}

func newDevicesCmd(stdout io.Writer) *cobra.Command {
	var asJSON bool
	cmd := withHelp("devices", &cobra.Command{
		Use:   "devices [--json]",
		Short: "List the GPUs imgpipe can use, or say why there is none",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			infos, err := listDevices()
			var nv *nvrtc.Info
			nvWhy := ""
			if info, err := probeNVRTC(); err != nil {
				nvWhy = folderrun.GPUReason(err)
			} else {
				nv = &info
			}
			why := ""
			switch {
			case err != nil:
				why = folderrun.GPUReason(err)
			case len(infos) == 0:
				why = "the CUDA driver reports no device"
			}
			var jpeg *cudastage.NVJPEGInfo
			if why == "" {
				info := probeNVJPEG(infos[0].Index)
				jpeg = &info
			}
			if asJSON {
				out := devicesJSON{Devices: infos, NVJPEG: jpeg, Error: why, NVRTC: nv, NVRTCError: nvWhy}
				if out.Devices == nil {
					out.Devices = []cudastage.DeviceInfo{}
				}
				b, err := json.MarshalIndent(out, "", "  ")
				if err != nil {
					return fatalError("devices: %v", err)
				}
				_, err = fmt.Fprintf(stdout, "%s\n", b)
				return err
			}
			if why != "" {
				_, err := fmt.Fprintf(stdout, "no usable GPU: %s\n%s\n", why, nvrtcLine(nv, nvWhy))
				return err
			}
			for _, d := range infos {
				if _, err := fmt.Fprintf(stdout, "GPU %s\n", d); err != nil {
					return err
				}
			}
			_, err = fmt.Fprintf(stdout, "nvJPEG: %s\n%s\n", jpeg, nvrtcLine(nv, nvWhy))
			return err
		},
	})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {\"devices\":[...]} and, with no usable GPU, \"error\"")
	return cmd
}

// openDevice opens GPU ordinal (--gpu) for run, worker and bench, returning it and the
// function that closes it; nil is the CUDA driver's (folderrun.GPUs). Tests set it (to a
// schedtest.FakeDevice, or a failure).
var openDevice func(ordinal int) (sched.Device, func() error, error)

// gpus is how run, worker and bench find and open GPUs (see folderrun.GPUs).
func gpus(wait bool, need string) folderrun.GPUs {
	return folderrun.GPUs{Open: openDevice, List: listDevices, Wait: wait, Need: need}
}
