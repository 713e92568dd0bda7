package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
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
				nvWhy = reason(err)
			} else {
				nv = &info
			}
			why := ""
			switch {
			case err != nil:
				why = reason(err)
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

// openDevice opens GPU ordinal (--gpu), returning it and the function that closes it.
// Tests replace it (with a schedtest.FakeDevice, or a failure).
var openDevice = func(ordinal int) (sched.Device, func() error, error) { return cudastage.Open(ordinal) }

// target is where pixel stages run: GPUs, or the CPU when devs is empty.
type target struct {
	devs    []sched.Device
	closers []func() error // devs[i]'s is closers[i]
	why     string         // why the CPU is used under --device auto
}

// countForGPU lets a run under auto leave its GPUs unstarted when the CPU alone finishes
// sooner (gpu.Options.Inputs), which needs a count of its inputs: it counts a
// local walk up to limit. With more inputs (a folder with more entries than limit is not
// walked: its names are cheaper to read than its files' information), or inputs in a
// bucket, it starts the GPUs at once, as cuda does.
func countForGPU(ctx context.Context, in *inputs, o *gpu.Options, tgt *target, limit int) {
	switch {
	case blobio.IsURL(in.dir), len(in.files) > limit, in.dir != "" && moreEntries(in.dir, limit):
	default:
		if n := in.countUpTo(ctx, limit); n >= 0 && n <= limit {
			o.Inputs = n
			return
		}
	}
	sched.Start(tgt.devs...)
}

// moreEntries reports whether folder dir has more than n entries, reading names only.
func moreEntries(dir string, n int) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false // the walk says why
	}
	defer f.Close()
	names, _ := f.Readdirnames(n + 1)
	return len(names) > n
}

// close closes the GPUs; on the CPU there is nothing to close. A GPU still opening (the
// CPU did the whole run meanwhile) is closed in the background rather than waited for:
// the process may end first, which ends the driver's work on it.
func (t *target) close() error {
	var errs []error
	for i, c := range t.closers {
		if !sched.Opened(t.devs[i]) {
			go c()
			continue
		}
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// resolveDevice turns --device (and --gpu) into where pixel stages run, for run and bench
// alike. cpu never touches CUDA. cuda opens the GPUs of gpus or fails saying why (exit 3: a
// runtime problem, not a usage one). auto opens them, or when no GPU works runs on the
// CPU, saying so once on stderr (even with --quiet, since it changes where the run happens).
// An ordinal the driver does not have fails under auto too: the user named a GPU, and
// running elsewhere would hide the mistake. need, when set, says what requires a GPU
// (bench copy): then no GPU is fatal under auto too. gpus all is every GPU the driver
// lists. A GPU that fails to open closes those opened before it. wait waits for the GPUs
// to finish opening, so that a GPU the driver cannot open is one of the failures above
// (bench, and the queue worker, which runs many times on them); run does not wait: its
// GPU run starts on the CPU and finds out meanwhile (gpu.Options). cuda starts
// opening the GPUs at once; auto leaves that to the run, which does not start them when
// the CPU alone finishes sooner (gpu.Options.Inputs).
func resolveDevice(device string, gpus pipeline.GPUSet, need string, wait bool, stderr io.Writer) (*target, error) {
	cpu := &target{}
	if device == "cpu" { // else auto or cuda: the settings table checked it
		return cpu, nil
	}
	ordinals, err := gpus.Ordinals(), error(nil)
	if gpus == pipeline.AllGPUs {
		ordinals, err = allOrdinals()
	}
	tgt := &target{}
	for _, n := range ordinals { // none when listing them failed
		dev, closeDev, openErr := openDevice(n)
		if s, ok := dev.(sched.Starter); ok && openErr == nil {
			switch {
			case wait:
				if openErr = s.OpenErr(); openErr != nil {
					closeDev()
				}
			case device == "cuda":
				s.Start() // meanwhile the run gets ready; auto leaves it to the run (gpu.Options.Inputs)
			}
		}
		if err = openErr; err != nil {
			tgt.close()
			break
		}
		tgt.devs, tgt.closers = append(tgt.devs, dev), append(tgt.closers, closeDev)
	}
	switch {
	case errors.Is(err, cudastage.ErrNoSuchGPU):
		return nil, noSuchGPU(err)
	case err != nil && need != "":
		return nil, fatalError("%s, and none is usable: %s", need, reason(err))
	case err != nil && device == "cuda":
		return nil, fatalError("--device cuda: no usable GPU: %s", reason(err))
	case err != nil:
		// One short line: the whole reason (a loader's list of places tried) is what
		// 'imgpipe devices' is for.
		fmt.Fprintf(stderr, "imgpipe: no usable GPU (%s); running on the CPU ('imgpipe devices' says why)\n", shortReason(err))
		cpu.why = reason(err)
		return cpu, nil
	}
	return tgt, nil
}

// allOrdinals are the ordinals of every GPU the driver lists (--gpu all); none is an error
// saying why.
func allOrdinals() ([]int, error) {
	infos, err := listDevices()
	if err == nil && len(infos) == 0 {
		err = errors.New("the CUDA driver reports no device")
	}
	ordinals := make([]int, len(infos))
	for i, d := range infos {
		ordinals[i] = d.Index
	}
	return ordinals, err
}

// noSuchGPU is the fatal error for a --gpu (or execution.gpu) that names no GPU the
// driver sees; err (cudastage's) already says how many there are.
func noSuchGPU(err error) error {
	return fatalError("%s; 'imgpipe devices' lists them", reason(err))
}

// shortReason is the gist of why a GPU cannot be used: the driver's sentinel (no libcuda, no
// device, too old) when err is one, else its first clause.
func shortReason(err error) string {
	for _, s := range []error{cu.ErrNoDriver, cu.ErrNoDevice, cu.ErrDriverTooOld} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	r, _, _ := strings.Cut(reason(err), ": ")
	return r
}

// reason formats why a GPU cannot be used, without the empty detail some loader errors end
// with ("...not found (is the NVIDIA driver installed?): ").
func reason(err error) string {
	return strings.TrimRight(err.Error(), ": ")
}
