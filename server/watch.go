// This file stands in for the server branch's Client.Wait and Job.Finished (the same
// signatures and contracts), so that the cli branch builds and tests on its own: delete it
// and watch_test.go when the server branch is merged.

package server

import (
	"context"
	"time"
)

// Finished reports whether the job has ended (done, failed or cancelled).
func (j Job) Finished() bool {
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
		if j.Finished() {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-t.C:
		}
	}
}
