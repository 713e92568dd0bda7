package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/imgpipe/imgpipe/pipeline"
)

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
