package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

// Ended reports whether the job is in a final state (done, failed or cancelled): its
// Summary and ExitCode will not change.
func (j Job) Ended() bool {
	return j.State == "done" || j.State == "failed" || j.State == "cancelled"
}

// Wait polls job id every interval, calling seen (when not nil) with each state it gets,
// until the job ends; it returns the final state. It returns early with ctx's error, or
// with the first error of a poll (an unreachable server, an unknown id), and the last
// state it saw.
func (c *Client) Wait(ctx context.Context, id string, every time.Duration, seen func(Job)) (Job, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last Job
	for {
		j, err := c.Job(ctx, id)
		if err != nil {
			return last, err
		}
		last = j
		if seen != nil {
			seen(j)
		}
		if j.Ended() {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-t.C:
		}
	}
}

// Failures returns the first n failed inputs of job id's report, reading no more of it.
func (c *Client) Failures(ctx context.Context, id string, n int) ([]pipeline.ReportLine, error) {
	pr, pw := io.Pipe()
	defer pr.Close() // ends Report's copy when n are found before the end
	go func() { pw.CloseWithError(c.Report(ctx, id, pw)) }()
	var out []pipeline.ReportLine
	dec := json.NewDecoder(pr)
	for len(out) < n {
		var l pipeline.ReportLine
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return out, err
		}
		if l.Status == pipeline.StatusFailed {
			out = append(out, l)
		}
	}
	return out, nil
}
