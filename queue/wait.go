package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/imgpipe/imgpipe/pipeline"
)

// ServerGone is how long Wait goes on without an answer from the server before it gives
// up, saying that the server is gone: a restart takes seconds, an outage longer than this
// is better reported than waited out in silence.
var ServerGone = time.Minute

// Wait blocks until every task of job j has a final result, and returns the report: one
// line per input in input order, and the summary (counts, the seconds from the submit to
// the last result, the devices and the number of workers that made them). A task with
// several results (delivered again after its worker went silent, or a result published
// twice) counts once: the first stored wins, and being the same input through the same
// chain, the others say the same. progress, if set, is called with the number of tasks
// done whenever it grows. A server restart is waited out (the results stay on the server,
// and are read on from where Wait was); a server not reachable for ServerGone is an error
// that says so. Wait returns ctx's error when ctx ends first.
func Wait(ctx context.Context, js jetstream.JetStream, j *Job, progress func(done, total int)) ([]pipeline.ReportLine, pipeline.Summary, error) {
	sum := pipeline.Summary{Pipeline: j.Pipeline}
	lines := make([]pipeline.ReportLine, j.Tasks)
	have := make([]bool, j.Tasks)
	done := 0
	var last time.Time
	var devices []string
	workers := map[string]bool{}
	f := &follower{js: js, subject: resultsPrefix + j.Name}
	for done < j.Tasks {
		batch, err := f.fetch(ctx)
		if ctx.Err() != nil {
			return nil, sum, ctx.Err()
		}
		if err != nil {
			return nil, sum, fmt.Errorf("job %s: %w; its results so far are kept on the server: wait again once it is back", j.Name, err)
		}
		for _, msg := range batch {
			var r Result
			if json.Unmarshal(msg.Data(), &r) != nil || r.Index < 0 || r.Index >= j.Tasks || have[r.Index] {
				continue // not ours, or a duplicate
			}
			have[r.Index], lines[r.Index] = true, r.Line
			done++
			if r.At.After(last) {
				last = r.At
			}
			if !slices.Contains(devices, r.Device) {
				devices = append(devices, r.Device)
			}
			workers[r.Worker] = true
			if progress != nil {
				progress(done, j.Tasks)
			}
		}
	}
	for _, l := range lines {
		switch l.Status {
		case pipeline.StatusOK:
			sum.OK++
			sum.Megapixels += float64(l.Width) * float64(l.Height) / 1e6
		case pipeline.StatusFailed:
			sum.Failed++
		case pipeline.StatusSkipped:
			sum.Skipped++
		}
	}
	if !last.IsZero() {
		sum.Seconds = last.Sub(j.Created).Seconds()
	}
	slices.Sort(devices)
	sum.Device, sum.Workers = strings.Join(devices, ","), len(workers)
	return lines, sum, nil
}

// follower reads a job's results in order with an ordered consumer, made again from the
// next result's sequence when it fails (a server restart drops it).
type follower struct {
	js      jetstream.JetStream
	subject string
	cons    jetstream.Consumer
	next    uint64    // the stream sequence of the next result to read; 0 from the start
	lastOK  time.Time // when the server last answered
	lastErr error
}

// fetch returns the results that came within DefaultPoll (maybe none). Failures are
// retried every DefaultPoll until the server has not answered for ServerGone, which is an
// error naming the last failure.
func (f *follower) fetch(ctx context.Context) ([]jetstream.Msg, error) {
	if f.lastOK.IsZero() {
		f.lastOK = time.Now()
	}
	for {
		msgs, err := f.try(ctx)
		if err == nil {
			f.lastOK = time.Now()
			return msgs, nil
		}
		f.cons, f.lastErr = nil, err
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Since(f.lastOK) >= ServerGone {
			return nil, fmt.Errorf("the queue server is gone: no answer for %v (%v)", ServerGone, f.lastErr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(DefaultPoll):
		}
	}
}

// try makes the consumer if needed and fetches what came within DefaultPoll.
func (f *follower) try(ctx context.Context) ([]jetstream.Msg, error) {
	if f.cons == nil {
		// Without a bound on its resets, an ordered consumer's Fetch retries forever, ignoring
		// every deadline, while the server is down: one reset, and the follower makes the
		// consumer again at its next try.
		cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{f.subject}, MaxResetAttempts: 1}
		if f.next > 0 {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, f.next
		}
		cctx, cancel := context.WithTimeout(ctx, DefaultPoll)
		cons, err := f.js.OrderedConsumer(cctx, ResultsStream, cfg)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("results: %w", err)
		}
		f.cons = cons
	}
	batch, err := f.cons.Fetch(256, jetstream.FetchMaxWait(DefaultPoll))
	if err != nil {
		f.cons = nil
		return nil, fmt.Errorf("results: %w", err)
	}
	var msgs []jetstream.Msg
	for msg := range batch.Messages() {
		if meta, err := msg.Metadata(); err == nil {
			f.next = meta.Sequence.Stream + 1
		}
		msgs = append(msgs, msg)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		if len(msgs) == 0 {
			return nil, fmt.Errorf("results: %w", err)
		}
		f.cons = nil // what came is kept; the next fetch makes the consumer again
	}
	return msgs, nil
}
