package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/imgpipe/imgpipe/pipeline"
)

// Wait blocks until every task of job j has a final result, and returns the report: one
// line per input in input order, and the summary (counts, the seconds from the submit to
// the last result, the devices and the number of workers that made them). A task with
// several results (delivered again after its worker went silent, or a result published
// twice) counts once: the first stored wins, and being the same input through the same
// chain, the others say the same. progress, if set, is called with the number of tasks
// done whenever it grows. Wait returns ctx's error when ctx ends first.
func Wait(ctx context.Context, js jetstream.JetStream, j *Job, progress func(done, total int)) ([]pipeline.ReportLine, pipeline.Summary, error) {
	sum := pipeline.Summary{Pipeline: j.Pipeline}
	lines := make([]pipeline.ReportLine, j.Tasks)
	have := make([]bool, j.Tasks)
	done := 0
	var last time.Time
	var devices []string
	workers := map[string]bool{}
	if j.Tasks > 0 {
		cons, err := js.OrderedConsumer(ctx, ResultsStream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{resultsPrefix + j.Name},
		})
		if err != nil {
			return nil, sum, fmt.Errorf("job %s: results: %w", j.Name, err)
		}
		it, err := cons.Messages()
		if err != nil {
			return nil, sum, fmt.Errorf("job %s: results: %w", j.Name, err)
		}
		stop := context.AfterFunc(ctx, it.Stop)
		defer stop()
		defer it.Stop()
		for done < j.Tasks {
			msg, err := it.Next()
			if ctx.Err() != nil {
				return nil, sum, ctx.Err()
			}
			if err != nil {
				return nil, sum, fmt.Errorf("job %s: results: %w", j.Name, err)
			}
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
