package gpu

import (
	"fmt"
	"sort"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// DefaultLinger is how long a partly filled GPU batch waits for more images
// (Options.Linger): long enough for the decode workers to fill a batch, short enough
// that a slow or paused input never holds images back.
const DefaultLinger = 20 * time.Millisecond

// DefaultSlots is the number of batches a GPU run on streams streams keeps in flight, from
// filling to saved: one per stream on the device, one being filled by the decode workers
// and one held by the save workers. Every GPU run (and imgpipe bench) sizes its slots so.
func DefaultSlots(streams int) int { return streams + 2 }

// DefaultSlotBytes is a slot's input capacity when neither Options.SlotBytes nor a
// page-locked budget sets it: room for batch 1080p RGB frames.
func DefaultSlotBytes(batch int) int { return batch * sched.AlignUp(1920*1080*3) }

// fileHostShare is how much smaller a slot's page-locked input is than its device input
// when files go to the device decoder (sched.Config.HostInBytes): the page-locked input
// then holds the files' bytes (and the pixels of inputs the CPU decodes), the device input
// their decoded pixels. A JPEG photo's file is well under a quarter of its pixels' bytes
// (about an eighth at quality 90); a batch whose files fill it is sealed early, and a
// CPU-decoded image larger than it runs its chain on the CPU.
const fileHostShare = 4

// hostInFor is the page-locked input of a slot of slotBytes whose inputs are files.
func hostInFor(slotBytes int) int {
	return max(sched.Align, sched.AlignDown(slotBytes/fileHostShare))
}

// slotBytesFor is the largest slot capacity whose slots, with the page-locked buffers
// that withHostBuffers gives them, fit in budget bytes of page-locked memory
// (sched.HostBytes, the executor's own count).
func slotBytesFor(dev sched.Device, cfg sched.Config, budget int64, files bool) (int, error) {
	// The memory grows with the capacity: the largest capacity, in steps of Align, that fits.
	per := sort.Search(sched.MaxSlotBytes/sched.Align, func(k int) bool {
		cfg.SlotBytes = (k + 1) * sched.Align
		return sched.HostBytes(dev, withHostBuffers(cfg, files)) > budget
	}) * sched.Align
	if per < sched.Align {
		return 0, fmt.Errorf("run: a page-locked budget of %d MiB is too small for %d slots of batch %d", budget>>20, cfg.Slots, cfg.Batch)
	}
	return per, nil
}

// withHostBuffers returns cfg with the page-locked input and output of its SlotBytes:
// when files go to the device, only their bytes cross the link and the input holds
// them (hostInFor); the output is sized for the segment (hostOutFor).
func withHostBuffers(cfg sched.Config, files bool) sched.Config {
	if files {
		cfg.HostInBytes = hostInFor(cfg.SlotBytes)
	}
	cfg.HostOutBytes = hostOutFor(cfg.Ops, cfg.SlotBytes)
	return cfg
}

// hostOutRefs are the input shapes whose outputs size a slot's page-locked output
// (hostOutFor): a 1080p frame and a 12 MP photo. Smaller inputs make more output per
// input byte (a thumbnail of a small photo), which hostOutFloor covers.
var hostOutRefs = []sched.Shape{{W: 1920, H: 1080, C: 3}, {W: 4032, H: 3024, C: 3}}

// hostOutHeadroom is how many times its share of the input over hostOutRefs a chain's
// output gets in a slot's page-locked output.
const hostOutHeadroom = 2

// hostOutFloor is the least page-locked output a slot gets (unless its input is smaller):
// a batch of 56 thumbnails of 256x256 RGB (11 MB), whatever their inputs' sizes.
const hostOutFloor = 16 << 20

// hostOutFor is the page-locked output of a slot of slotBytes for a segment of ops
// (sched.Config.HostOutBytes): hostOutHeadroom times the largest share of its input
// that the output takes over hostOutRefs, at least hostOutFloor, at most slotBytes. A
// thumbnail chain then locks 16 MiB per slot for its outputs instead of 348 MB, memory
// whose locking at the start of a run held up nvJPEG's warm-up. Only speed depends on
// it: a batch whose outputs fill it is sealed early, and an image whose output alone is
// larger runs on the CPU.
func hostOutFor(ops []sched.Op, slotBytes int) int {
	share := 0.0
	for _, in := range hostOutRefs {
		share = max(share, float64(sched.OutputBytes(ops, in))/float64(in.Bytes()))
	}
	n := sched.AlignDown(int(min(1, hostOutHeadroom*share) * float64(slotBytes)))
	return min(slotBytes, max(hostOutFloor, n))
}

// gpuBatch is the batch of a GPU run: batch when set; otherwise, when files go to the
// device's decoder, as many as its calls take, since larger calls decode faster (figures
// in bench/results/2026-12-07-code-comments.md); else pipeline.DefaultBatch.
func gpuBatch(batch int, files sched.FileDecoder) int {
	if batch > 0 {
		return batch
	}
	if info, ok := files.(sched.DecoderInfo); ok && info.DecoderBatch() > 0 {
		return min(info.DecoderBatch(), sched.MaxBatch)
	}
	return pipeline.DefaultBatch
}
