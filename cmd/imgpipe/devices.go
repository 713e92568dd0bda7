package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/cudastage"
)

// listDevices lists the GPUs for `imgpipe devices`; tests replace it.
var listDevices = cudastage.Devices

// devicesJSON is the --json output: the devices, or why there is none.
type devicesJSON struct {
	Devices []cudastage.DeviceInfo `json:"devices"`
	// Error says why no GPU can be used (no libcuda, no device, driver too old).
	Error string `json:"error,omitempty"`
}

func newDevicesCmd(stdout io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "devices [--json]",
		Short: "List the GPUs imgpipe can use, or say why there is none",
		Long: `List the CUDA GPUs the driver sees: index, name, compute capability, SMs, memory,
async copy engines, and the driver's CUDA version (and release, when readable).
'imgpipe run --device cuda' uses GPU 0.

With no usable GPU it says why (no libcuda.so.1, no device, a driver older than
CUDA 12.0) and still exits 0: having no GPU is an answer, not an error.`,
		Example: `  imgpipe devices
  imgpipe devices --json | jq '.devices[0].name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			infos, err := listDevices()
			why := ""
			switch {
			case err != nil:
				why = reason(err)
			case len(infos) == 0:
				why = "the CUDA driver reports no device"
			}
			if asJSON {
				out := devicesJSON{Devices: infos, Error: why}
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
				_, err := fmt.Fprintf(stdout, "no usable GPU: %s\n", why)
				return err
			}
			for _, d := range infos {
				if _, err := fmt.Fprintf(stdout, "GPU %s\n", d); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: {\"devices\":[...]} and, with no usable GPU, \"error\"")
	return cmd
}
