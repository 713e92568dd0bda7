package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/reugn/go-streams"

	"github.com/imgpipe/imgpipe/stages"
)

// Flow exposes the pipeline as a go-streams Flow running on its own goroutines until In
// is closed or ctx ends; then Out is closed.
//
// Elements sent to In may be an Input, a string (a file path, which is also its name),
// []byte (an encoded image) or *stages.Image (decoded pixels); unnamed ones are named
// "#N" by position. Out yields a Result per element, in input order. go-streams has no
// error channel, so errors travel inside the items: a failed input is a Result with Status
// failed and Err "stage: reason", and an element of another type is such a Result too.
// A fatal error of the run (see Run) comes as a last Result with Index -1. When the chain
// saves, the encoded file is in Result.Encoded.
//
// The flow's planning errors are returned before anything starts.
func (p *Pipeline) Flow(ctx context.Context) (streams.Flow, error) {
	plan, err := p.Plan()
	if err != nil {
		return nil, err
	}
	f := &flowAdapter{in: make(chan any), out: make(chan any)}
	go func() {
		defer close(f.out)
		out := make(chan Result)
		runErr := make(chan error, 1)
		go func() {
			_, err := Run(ctx, plan, &flowSource{in: f.in}, ToChan(out), p.opt)
			runErr <- err
			close(out)
		}()
		for r := range out {
			f.out <- r
		}
		err := <-runErr
		if err != nil && !errors.Is(err, ErrStopped) && ctx.Err() == nil {
			f.out <- Result{Index: -1, Status: StatusFailed, Err: err}
		}
		// Keep the upstream from blocking forever on a flow that stopped early.
		go func() {
			for range f.in {
			}
		}()
	}()
	return f, nil
}

type flowAdapter struct {
	in  chan any
	out chan any
}

var _ streams.Flow = (*flowAdapter)(nil)

// In returns the input channel; close it when no more input is expected.
func (f *flowAdapter) In() chan<- any { return f.in }

// Out returns the output channel of Results.
func (f *flowAdapter) Out() <-chan any { return f.out }

// Via streams the results into next and returns next.
func (f *flowAdapter) Via(next streams.Flow) streams.Flow {
	go f.transmit(next)
	return next
}

// To streams the results into sink and blocks until the sink has completed.
func (f *flowAdapter) To(sink streams.Sink) {
	f.transmit(sink)
	sink.AwaitCompletion()
}

func (f *flowAdapter) transmit(inlet streams.Inlet) {
	for e := range f.out {
		inlet.In() <- e
	}
	close(inlet.In())
}

// flowSource turns the flow's elements into inputs.
type flowSource struct {
	in <-chan any
	n  int
}

func (s *flowSource) Next(ctx context.Context) (Input, error) {
	var e any
	select {
	case v, ok := <-s.in:
		if !ok {
			return Input{}, io.EOF
		}
		e = v
	case <-ctx.Done():
		return Input{}, ctx.Err()
	}
	s.n++
	name := fmt.Sprintf("#%d", s.n)
	switch v := e.(type) {
	case Input:
		if v.Name == "" {
			v.Name = name
		}
		return v, nil
	case string:
		return Input{Name: v, Path: v}, nil
	case []byte:
		return Input{Name: name, Data: v}, nil
	case *stages.Image:
		return Input{Name: name, Image: v}, nil
	}
	return Input{Name: name, Err: fmt.Errorf("flow: unsupported element type %T (want Input, string, []byte or *stages.Image)", e)}, nil
}
