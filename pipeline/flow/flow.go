// Package flow adapts an imgpipe pipeline to github.com/reugn/go-streams: New exposes a
// pipeline as a streams.Flow whose items carry their errors. It is a package of its own so
// that package pipeline does not import go-streams.
package flow

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/reugn/go-streams"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

// New exposes p as a go-streams Flow running on its own goroutines, with p's options, until
// In is closed or ctx ends; then Out is closed.
//
// Elements sent to In may be a pipeline.Input, a string (a file path, which is also its
// name), []byte (an encoded image) or *stages.Image (decoded pixels); unnamed ones are named
// "#N" by position. Out yields a pipeline.Result per element, in input order. go-streams has
// no error channel, so errors travel inside the items: a failed input is a Result with
// Status failed and Err "stage: reason", and an element of another type is such a Result
// too. A fatal error of the run (see pipeline.Run) comes as a last Result with Index -1.
// When the chain saves, the encoded file is in Result.Encoded.
//
// The flow's planning errors are returned before anything starts.
func New(ctx context.Context, p *pipeline.Pipeline) (streams.Flow, error) {
	plan, err := p.Plan()
	if err != nil {
		return nil, err
	}
	f := &flowAdapter{in: make(chan any), out: make(chan any)}
	go func() {
		defer close(f.out)
		out := make(chan pipeline.Result)
		runErr := make(chan error, 1)
		go func() {
			_, err := pipeline.Run(ctx, plan, &flowSource{in: f.in}, pipeline.ToChan(out), p.Options())
			runErr <- err
			close(out)
		}()
		for r := range out {
			f.out <- r
		}
		err := <-runErr
		if err != nil && !errors.Is(err, pipeline.ErrStopped) && ctx.Err() == nil {
			f.out <- pipeline.Result{Index: -1, Status: pipeline.StatusFailed, Err: err}
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

// Out returns the output channel of pipeline.Results.
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

// Next returns the next element sent to the flow as an Input, or io.EOF once In is closed.
func (s *flowSource) Next(ctx context.Context) (pipeline.Input, error) {
	var e any
	select {
	case v, ok := <-s.in:
		if !ok {
			return pipeline.Input{}, io.EOF
		}
		e = v
	case <-ctx.Done():
		return pipeline.Input{}, ctx.Err()
	}
	s.n++
	name := fmt.Sprintf("#%d", s.n)
	switch v := e.(type) {
	case pipeline.Input:
		if v.Name == "" {
			v.Name = name
		}
		return v, nil
	case string:
		return pipeline.Input{Name: v, Path: v}, nil
	case []byte:
		return pipeline.Input{Name: name, Data: v}, nil
	case *stages.Image:
		return pipeline.Input{Name: name, Image: v}, nil
	}
	return pipeline.Input{Name: name, Err: fmt.Errorf("flow: unsupported element type %T (want Input, string, []byte or *stages.Image)", e)}, nil
}
