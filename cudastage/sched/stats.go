package sched

import (
	"fmt"
	"time"

	"github.com/imgpipe/imgpipe/memory/devmem"
	"github.com/imgpipe/imgpipe/memory/pinned"
)

// Stats are an executor's totals over the batches it completed, timed by
// device events.
//
// Phases are timed exactly: the executor chains batches across streams so
// that a batch's H2D starts only after the previous batch's H2D ended (and
// likewise for kernels and D2H; decodes overlap, see Decode), and records each phase's start event after
// that wait. A phase's span is therefore the time its engine worked on it,
// not time spent queued behind another stream.
type Stats struct {
	Device                string
	Streams, Slots, Batch int
	SlotBytes             int
	HostBytes             int64 // page-locked host memory held by the slots
	DeviceBytes           int64 // device memory held by the slots and streams (in devmem block sizes)

	// HostPool and DevicePool are the figures of the page-locked pool and
	// the device allocator the executor's memory comes from, when Stats was
	// called: reserved, in use, peak, hits and misses. Shared pools
	// (Config.HostPool, Config.DevicePool) count the use of every executor
	// on them. The executor takes its memory once, in New, so its own pools
	// show only misses; hits come from shared pools reused across executors.
	HostPool   pinned.Stats
	DevicePool devmem.Stats

	Batches  int64
	Images   int64
	Pixels   int64 // input pixels (W·H summed)
	H2DBytes int64
	D2HBytes int64

	// Files is the number of images decoded on the device from files
	// (ReserveFile), FileBytes their bytes, and DecodeFailed those the device
	// could not decode.
	Files, FileBytes, DecodeFailed int64

	H2D time.Duration // ΣH2D over batches
	// Decode is Σ over batches of the device's decoding of their files. The
	// decodes of batches on different streams overlap (they are not chained
	// like the other phases), so it may exceed Wall.
	Decode  time.Duration
	Kernels time.Duration // Σ over batches of the segment's kernels, first start to last end
	D2H     time.Duration // ΣD2H (with an encoding last op: the lengths', then the files')
	Ops     []OpTime      // Σ per op of the segment, in segment order
	// Wall is the device timeline from the first batch's H2D start to the
	// last batch's D2H end.
	Wall time.Duration

	first, last time.Duration // device timeline bounds behind Wall
}

// OpTime is the total device time of one op of the segment.
type OpTime struct {
	Op    string
	Total time.Duration
}

// Busiest is the time of the busiest phase (H2D, decode, kernels or D2H): the least
// Wall could be with perfect overlap.
func (s Stats) Busiest() time.Duration { return max(s.H2D, s.Decode, s.Kernels, s.D2H) }

// Overlap is the overlap efficiency wall ÷ max(ΣH2D, Σdecode, Σkernels,
// ΣD2H): 1 when the busiest engine never waits, larger when phases fail to
// overlap (with no overlap at all it is the sum over the max), and may be
// below 1 when decodes on several streams overlap. It is 0 before any batch.
func (s Stats) Overlap() float64 {
	m := s.Busiest()
	if m <= 0 {
		return 0
	}
	return float64(s.Wall) / float64(m)
}

// GPixelsPerSec is input gigapixels per second of Wall.
func (s Stats) GPixelsPerSec() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return float64(s.Pixels) / s.Wall.Seconds() / 1e9
}

// Bottleneck names the phase with the largest total: "h2d", "decode",
// "kernels" or "d2h" ("" before any batch).
func (s Stats) Bottleneck() string {
	switch m := max(s.H2D, s.Decode, s.Kernels, s.D2H); {
	case m <= 0:
		return ""
	case m == s.H2D:
		return "h2d"
	case m == s.Decode:
		return "decode"
	case m == s.Kernels:
		return "kernels"
	}
	return "d2h"
}

// String is a one-line summary for stderr.
func (s Stats) String() string {
	files := ""
	if s.Files > 0 {
		files = fmt.Sprintf(", %d decoded on the device in Σdecode %v (%d failed)", s.Files, s.Decode.Round(time.Microsecond), s.DecodeFailed)
	}
	return fmt.Sprintf("%d batches, %d images%s on %s (%d streams, batch %d): wall %v, ΣH2D %v, Σkernels %v, ΣD2H %v, overlap efficiency %.2f, %.2f GP/s; "+
		"page-locked %s reserved (peak %s), device %s reserved (peak %s), %d pool hits",
		s.Batches, s.Images, files, s.Device, s.Streams, s.Batch, s.Wall.Round(time.Microsecond),
		s.H2D.Round(time.Microsecond), s.Kernels.Round(time.Microsecond), s.D2H.Round(time.Microsecond),
		s.Overlap(), s.GPixelsPerSec(),
		mib(s.HostPool.Reserved), mib(s.HostPool.Peak), mib(int64(s.DevicePool.Reserved)), mib(int64(s.DevicePool.PeakReserved)), s.PoolHits())
}

// PoolHits is the number of buffers the executor (and other users of
// shared pools) got from the pools' caches, page-locked and device.
func (s Stats) PoolHits() uint64 { return s.HostPool.Hits + s.DevicePool.Hits }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// batchStats are one completed batch's counts.
type batchStats struct {
	images, files                   int
	pixels, fileBytes, decodeFailed int64
	h2dBytes, d2hBytes              int64
}

// add accumulates one completed batch: start and end are its first and last
// events' times from the base event, dur its phases' durations.
func (s *Stats) add(start, end time.Duration, ph []phase, dur []time.Duration, b batchStats) {
	if s.Batches == 0 || start < s.first {
		s.first = start
	}
	if s.Batches == 0 || end > s.last {
		s.last = end
	}
	s.Wall = s.last - s.first
	s.Batches++
	s.Images += int64(b.images)
	s.Files += int64(b.files)
	s.FileBytes += b.fileBytes
	s.DecodeFailed += b.decodeFailed
	s.Pixels += b.pixels
	s.H2DBytes += b.h2dBytes
	s.D2HBytes += b.d2hBytes
	for k, p := range ph {
		switch p.kind {
		case phaseH2D:
			s.H2D += dur[k]
		case phaseDecode:
			s.Decode += dur[k]
		case phaseOp:
			s.Ops[p.op].Total += dur[k]
			s.Kernels += dur[k]
		case phaseD2H:
			s.D2H += dur[k]
		}
	}
}
