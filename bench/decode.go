package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// MaxDecodeBytes bounds the JPEG files bench decode holds in memory at once.
const MaxDecodeBytes = 4 << 30

// DecodeResult is one decoder's figure over a folder's JPEGs.
type DecodeResult struct {
	Decoder         string  // "go", "turbo", or "device"
	Batch           int     // the device's files per call (0 for go and turbo)
	Streams         int     // the device's streams, each with its own decoder state (0 for go and turbo)
	Images          int     // files decoded per run
	Failed          int     // files the decoder refused (for the device: or that none of its decoders takes)
	Seconds         float64 // median run
	ImagesPerSecond float64
	GPixelsPerSec   float64
	Engines         int // the device's hardware decode engines, when it reports them
}

// Decode measures JPEG decoding alone over the JPEG files of dir (the first o.Frames when
// positive): Go's decoder and libjpeg-turbo (when it loads) on one core, and the device's
// batched decode (sched.FileDecoder) when o.Device has one, once for each of o.Batch (0:
// the decoder's call size) and o.Streams (none: one stream): the batches are shared out over that many streams, each fed by its
// own goroutine as the executor's submit goroutines do, so one stream's host-side work
// overlaps another's decode on the engines; a run is timed from its first call to the
// synchronization of every stream. Each figure is the median of o.Repeats runs after
// o.Warmup. It prints one line per figure and returns the figures.
func Decode(ctx context.Context, o Options, dir string) ([]DecodeResult, error) {
	files, err := jpegFiles(dir, o.Frames)
	if err != nil {
		return nil, err
	}
	var pixels int64
	for _, f := range files {
		hd, err := stages.DecodeHeader(f, stages.DecodeOptions{})
		if err == nil {
			pixels += int64(hd.W) * int64(hd.H)
		}
	}
	cpu := func(b stages.JPEGBackend) func() (time.Duration, int, error) {
		return func() (time.Duration, int, error) {
			t0, failed := time.Now(), 0
			for _, f := range files {
				if ctx.Err() != nil {
					return 0, 0, ctx.Err()
				}
				if _, err := stages.Decode(f, stages.DecodeOptions{JPEG: b}, nil); err != nil {
					failed++
				}
			}
			return time.Since(t0), failed, nil
		}
	}
	type runner struct {
		name    string
		run     func() (time.Duration, int, error)
		batch   int
		streams int
		engines int
	}
	runs := []runner{{name: "go", run: cpu(stages.JPEGGo)}}
	if jpegturbo.Available() == nil {
		runs = append(runs, runner{name: "turbo", run: cpu(stages.JPEGTurbo)})
	}
	if o.Device != nil {
		if fd, err := sched.FileDecoderOf(o.Device); err == nil {
			streams, batches := o.Streams, o.Batch
			if len(streams) == 0 {
				streams = []int{1}
			}
			if len(batches) == 0 {
				batches = []int{0}
			}
			engines := 0
			if di, ok := o.Device.(sched.DecoderInfo); ok {
				engines = di.DecoderEngines()
			}
			for _, batch := range batches {
				if info, ok := fd.(sched.DecoderInfo); ok && batch == 0 {
					batch = info.DecoderBatch()
				}
				batch = cmp.Or(batch, pipeline.DefaultBatch)
				dd, err := newDeviceDecode(o.Device, fd, files, batch, slices.Max(streams))
				if err != nil {
					return nil, err
				}
				defer dd.close()
				for _, n := range streams {
					runs = append(runs, runner{name: "device", run: func() (time.Duration, int, error) { return dd.run(ctx, n) },
						batch: batch, streams: n, engines: engines})
				}
			}
		} else if o.Notice != nil {
			o.Notice(fmt.Sprintf("no device decode: %v", err))
		}
	}
	var out []DecodeResult
	for _, r := range runs {
		var times []time.Duration
		failed := 0
		for i := range o.Warmup + o.Repeats {
			d, f, err := r.run()
			if err != nil {
				return out, fmt.Errorf("decode %s: %w", r.name, err)
			}
			if i >= o.Warmup {
				times, failed = append(times, d), f
			}
		}
		slices.Sort(times)
		med := times[len(times)/2].Seconds()
		res := DecodeResult{Decoder: r.name, Batch: r.batch, Streams: r.streams, Images: len(files), Failed: failed, Seconds: med, Engines: r.engines}
		if med > 0 {
			res.ImagesPerSecond = float64(len(files)) / med
			res.GPixelsPerSec = float64(pixels) / med / 1e9
		}
		out = append(out, res)
		if o.Text != nil {
			how := "one core"
			if r.streams > 0 {
				how = fmt.Sprintf("batch %d, %d streams", r.batch, r.streams)
				if r.engines > 0 {
					how += fmt.Sprintf(", %d hardware engines", r.engines)
				}
			}
			fmt.Fprintf(o.Text, "decode %-7s %d JPEGs (%d failed): %.1f img/s, %.3f GP/s (%s)\n",
				r.name, len(files), failed, res.ImagesPerSecond, res.GPixelsPerSec, how)
		}
	}
	return out, nil
}

// jpegFiles reads the JPEG files under dir, in sorted order, at most limit when positive,
// refusing a set over MaxDecodeBytes before reading it.
func jpegFiles(dir string, limit int) ([][]byte, error) {
	var paths []string
	var total int64
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ext := strings.ToLower(filepath.Ext(p))
		if ext != ".jpg" && ext != ".jpeg" {
			return nil
		}
		if limit > 0 && len(paths) >= limit {
			return filepath.SkipAll
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if total += fi.Size(); total > MaxDecodeBytes {
			return fmt.Errorf("the JPEGs of %s hold over %d MiB; give --frames", dir, MaxDecodeBytes>>20)
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return nil, &OptionError{Err: err}
	}
	if len(paths) == 0 {
		return nil, &OptionError{Err: fmt.Errorf("no JPEG files under %s", dir)}
	}
	sort.Strings(paths)
	files := make([][]byte, len(paths))
	for i, p := range paths {
		if files[i], err = os.ReadFile(p); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// deviceDecode decodes files on a device in batches, on up to len(streams) streams: the
// files in page-locked memory, the images in device memory, as the executor's decode phase
// does.
type deviceDecode struct {
	dev     sched.Device
	fd      sched.FileDecoder
	batches []sched.DecodeCall
	host    [][]byte
	dst     []sched.DevPtr
	streams []sched.Stream
	refused int // files whose header failed or that no device decoder takes
}

func newDeviceDecode(dev sched.Device, fd sched.FileDecoder, files [][]byte, batch, streams int) (d *deviceDecode, err error) {
	d = &deviceDecode{dev: dev, fd: fd}
	err = onDevice(dev, func() error {
		for lo := 0; lo < len(files); lo += batch {
			var call sched.DecodeCall
			hostBytes, devBytes := 0, 0
			part := files[lo:min(lo+batch, len(files))]
			for _, f := range part {
				hostBytes += len(f)
				hd, err := stages.DecodeHeader(f, stages.DecodeOptions{Orient: true})
				route := ""
				if err == nil {
					route = fd.DecodeRoute(f)
				}
				if route == "" {
					d.refused++ // counted as failed, as the CPU runs count a bad header
					continue
				}
				s := sched.Shape{W: hd.W, H: hd.H, C: 3}
				call.Images = append(call.Images, sched.DecodeImage{Data: f, Shape: s, Orient: hd.Orientation, DstOff: devBytes, Decoder: route})
				devBytes += sched.AlignUp(s.Bytes())
			}
			if len(call.Images) == 0 {
				continue
			}
			h, err := dev.HostAlloc(hostBytes)
			if err != nil {
				return err
			}
			d.host = append(d.host, h)
			off := 0
			for i := range call.Images {
				n := copy(h[off:], call.Images[i].Data)
				call.Images[i].Data = h[off : off+n : off+n]
				off += n
			}
			if call.Dst, err = dev.DevAlloc(devBytes); err != nil {
				return err
			}
			d.dst = append(d.dst, call.Dst)
			d.batches = append(d.batches, call)
		}
		for range streams {
			s, err := dev.NewStream()
			if err != nil {
				return err
			}
			d.streams = append(d.streams, s)
		}
		return nil
	})
	if err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// run decodes every batch once, shared out over the first n streams, each fed by its own
// goroutine taking the next batch not yet taken, and returns the wall time from the start
// to the synchronization of every stream, and the files that failed.
func (d *deviceDecode) run(ctx context.Context, n int) (time.Duration, int, error) {
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	t0 := time.Now()
	for _, s := range d.streams[:n] {
		g.Go(func() error {
			return onDevice(d.dev, func() error {
				for i := int(next.Add(1)) - 1; i < len(d.batches) && gctx.Err() == nil; i = int(next.Add(1)) - 1 {
					if err := d.fd.Decode(s, &d.batches[i]); err != nil {
						return err
					}
				}
				return d.dev.SyncStream(s)
			})
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	t := time.Since(t0)
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	failed := d.refused
	for _, b := range d.batches {
		for _, im := range b.Images {
			if im.Err != nil {
				failed++
			}
		}
	}
	return t, failed, nil
}

func (d *deviceDecode) close() error {
	return onDevice(d.dev, func() error {
		var errs []error
		for _, h := range d.host {
			errs = append(errs, d.dev.HostFree(h))
		}
		for _, p := range d.dst {
			errs = append(errs, d.dev.DevFree(p))
		}
		for _, s := range d.streams {
			errs = append(errs, d.dev.DestroyStream(s))
		}
		return errors.Join(errs...)
	})
}

// onDevice runs fn on a locked OS thread with dev bound to it.
func onDevice(dev sched.Device, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := dev.BindThread(); err != nil {
		return err
	}
	return fn()
}
