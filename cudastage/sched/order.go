package sched

// Cross-stream ordering on the host. Each stream has its own submitting
// goroutine (see submitter), so that a Decode that blocks its thread (nvJPEG's
// batched hardware decode does, for the whole decode) holds up only its own
// stream: the decodes of consecutive batches overlap and keep several
// hardware engines busy. The device-side order of submit (batch k's H2D,
// kernels and D2H wait on batch k−1's events) still holds, but a StreamWait
// only waits for an event's latest recording at the time of the call: batch k
// must not wait on batch k−1's event before batch k−1 recorded it. A batch's
// order therefore says, on the host, which of its recordings it has made.

// Order marks, in the order a batch makes them: its H2D end, its last op's
// end, and its D2H end recorded and the batch handed to the waiter.
const (
	markH2D = iota
	markKernels
	markDone
	numMarks
)

// order is one batch's place in the submission chain. Only the goroutine that
// submits the batch closes its channels, in mark order; the next batch's
// goroutine waits on them.
type order struct {
	marks [numMarks]chan struct{}
	next  int // marks below next are closed
}

func newOrder() *order {
	o := &order{}
	for i := range o.marks {
		o.marks[i] = make(chan struct{})
	}
	return o
}

// doneOrder is the order before the first batch: every mark made.
func doneOrder() *order {
	o := newOrder()
	o.reach(numMarks - 1)
	return o
}

// reach closes every mark up to and including m that is not closed yet.
func (o *order) reach(m int) {
	for ; o.next <= m; o.next++ {
		close(o.marks[o.next])
	}
}

// wait blocks until mark m was made.
func (o *order) wait(m int) { <-o.marks[m] }
