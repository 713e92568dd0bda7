package gpu

import (
	"sync"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

// While the devices open, an input that the device would decode whole costs the CPU a
// whole decode, resize and encode if it runs there, and a small fraction of that once the
// device is up (figures in bench/results/2026-12-07-code-comments.md). An input that needs CPU work
// on either path (a progressive JPEG, a format the device does not decode) costs about
// the same on both. So the decode workers spend the start on the second kind: they read
// each input's header and set the first kind aside for the device (setAside), and run
// them on the CPU only when the source has nothing else (next). A folder of photos that
// mixes the two then has most of its CPU-only work done by the time the device opens.
//
// A set-aside input holds no memory: its file is read again when its turn comes, from the
// page cache for a local file (an object in a bucket, which would cross the network twice,
// is never set aside). So it leaves the window, which bounds the memory of inputs in
// flight; the reorder span still bounds how many are taken. Only a run whose sink keeps no
// image (writesOnly) does this, so that a set-aside input's result, held until reported in
// input order, is small.

// asideList is a first-in first-out list of set-aside inputs, safe for concurrent use.
type asideList struct {
	mu    sync.Mutex
	items []*pipeline.Item
	head  int
}

func (l *asideList) push(it *pipeline.Item) {
	l.mu.Lock()
	l.items = append(l.items, it)
	l.mu.Unlock()
}

func (l *asideList) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items) - l.head
}

// pop returns the oldest input, or nil when there is none.
func (l *asideList) pop() *pipeline.Item {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.head == len(l.items) {
		return nil
	}
	it := l.items[l.head]
	l.items[l.head] = nil
	l.head++
	if l.head == len(l.items) {
		l.items, l.head = l.items[:0], 0
	}
	return it
}

// stealWait is how long a decode worker waits for the source before it takes a set-aside
// input while the devices open. A folder yields its next input in microseconds, but a
// source that is ready only now and then (16 workers take from one feeder) would have the
// workers run on the CPU the inputs set aside for the device; a source that has nothing
// for this long is slow, or waits for the reorder span to drain.
const stealWait = 2 * time.Millisecond

// next returns a decode worker's next input, or nil when none is left. Once the devices
// are up (or failed to open) the set-aside inputs go first. Before, the source's go first,
// and a set-aside input is taken when the source has none for stealWait, or has ended: the
// CPU runs it rather than wait.
func (b *gpuBackend) next() *pipeline.Item {
	for {
		opening := b.opening()
		if !opening {
			if it := b.aside.pop(); it != nil {
				return it
			}
		}
		select {
		case it, ok := <-b.r.Jobs():
			return b.fromSource(it, ok)
		default:
		}
		var up <-chan struct{}
		var steal <-chan time.Time
		if opening {
			up = b.up
			if b.aside.len() > 0 {
				steal = time.After(stealWait)
			}
		}
		select {
		case it, ok := <-b.r.Jobs():
			return b.fromSource(it, ok)
		case <-up: // the set-aside inputs go to the devices now
		case <-steal:
			if it := b.aside.pop(); it != nil {
				return it
			}
		}
	}
}

// fromSource returns an input received from the source, counting it (pace), or when the
// source has ended (!ok), a set-aside input (nil when none is left).
func (b *gpuBackend) fromSource(it *pipeline.Item, ok bool) *pipeline.Item {
	if !ok {
		return b.aside.pop()
	}
	b.pace.taken.Add(1)
	return it
}

// setAside sets an input aside for the devices, reporting whether it did: only while they
// open (started, not up yet), in a run whose sink keeps no image, once per input, for a
// local file or bytes in memory, and when the device would decode its file whole
// (routeFile, without the rewrite of a progressive file, which is CPU work). finished
// reports an input that needs no more work: failed reading its header, dropped because the
// run is ending, or settled (skipped, or failed by its source).
func (b *gpuBackend) setAside(it *pipeline.Item, w *worker) (aside, finished bool) {
	r, in := b.r, it.Input()
	if !b.writesOnly || it.OutOfWindow() || b.run.files == nil || r.Plan().Load != nil || in.Image != nil ||
		in.Open != nil || (in.Data == nil && in.Path == "") || !b.opening() || !isClosed(b.started) {
		return false, false
	}
	if r.Settle(it) {
		return false, true
	}
	f, df, done := b.routeFile(it, w, false)
	if done {
		return false, true
	}
	f.Drop()
	if df == nil {
		return false, false
	}
	r.LeaveWindow(it)
	b.aside.push(it)
	b.setAsideN.Add(1)
	return true, false
}
