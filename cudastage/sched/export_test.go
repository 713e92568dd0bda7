package sched

// Internals for the tests of package sched_test, which use the fake device
// of package schedtest (an internal test cannot import it: it imports sched).

// OpenedSlot is what a test sees of a slot as it is taken for a new batch.
type OpenedSlot struct {
	ID   int   // the slot's index
	Held int   // results of its last batch not yet released
	D2H  Event // its last batch's D2H end event
}

// SetOnOpen makes f check every slot as it is taken for a new batch (with
// the executor's lock held). Set it before the first Reserve.
func (e *Executor) SetOnOpen(f func(OpenedSlot)) {
	e.onOpen = func(s *slot) { f(OpenedSlot{ID: s.id, Held: s.held, D2H: s.ev[len(s.ev)-1]}) }
}

// SlotID is the index of the slot holding the result.
func (r *Result) SlotID() int { return r.s.id }

// FreeSlots is the number of slots not in use, once the background
// allocation ended: those on the free list and those never allocated (a
// stop ends the allocation early).
func (e *Executor) FreeSlots() int {
	<-e.allocDone
	n := len(e.free)
	for _, s := range e.slots {
		if s.hostBufs == nil && s.id != 0 {
			n++
		}
	}
	return n
}

// WaitAllocated waits until every slot has its memory (or the background
// allocation stopped), for tests that look at the pools.
func (e *Executor) WaitAllocated() { <-e.allocDone }

// Slots is the number of slots.
func (e *Executor) Slots() int { return e.cfg.Slots }

// SlotID is the index of the slot holding the reservation.
func (r *Reservation) SlotID() int { return r.s.id }
