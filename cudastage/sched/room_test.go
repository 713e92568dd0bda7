package sched_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

// With Config.Room, a reservation never waits: ErrNoRoom while every slot is held, room in
// the open slot still taken, and Room called when a slot is freed.
func TestRoomNeverWaits(t *testing.T) {
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	room := make(chan struct{}, 16)
	e := startExec(t, ctx, dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 1, Slots: 2, Batch: 2, SlotBytes: 4096, Linger: -1,
		Room: func() {
			select {
			case room <- struct{}{}:
			default:
			}
		}})
	for deadline := time.Now().Add(5 * time.Second); e.FreeSlots() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second slot never joined the free list")
		}
	}
	var res []*Result
	for i := range 4 { // two full batches: both slots
		r, err := e.Reserve(ctx, 4, 4, 3, i)
		if err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
		r.Commit()
	}
	for range 4 {
		res = append(res, <-e.Results())
	}
	for len(room) > 0 {
		<-room
	}
	if _, err := e.Reserve(context.Background(), 4, 4, 3, 4); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("Reserve with every slot held: %v, want ErrNoRoom", err)
	}
	if _, err := e.ReserveFile(context.Background(), File{Size: 10, Shape: Shape{W: 4, H: 4, C: 3}, Orient: 1, Decoder: "fake"}, 4); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("ReserveFile with every slot held: %v, want ErrNoRoom", err)
	}
	res[0].Release()
	res[1].Release() // the first slot's last result: the slot is free
	select {
	case <-room:
	case <-time.After(5 * time.Second):
		t.Fatal("Room not called when a slot was freed")
	}
	a, err := e.Reserve(ctx, 4, 4, 3, 4)
	if err != nil {
		t.Fatalf("Reserve after Room: %v", err)
	}
	b, err := e.Reserve(ctx, 4, 4, 3, 5) // the open slot has room for one more
	if err != nil {
		t.Fatalf("Reserve into the open slot: %v", err)
	}
	a.Commit()
	b.Commit()
	for range 2 {
		(<-e.Results()).Release()
	}
	res[2].Release()
	res[3].Release()
	e.CloseInput()
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
}
