package pipeline

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// WriteReport writes a whole report: lines in the order given, then the summary line, in
// the format of a run's report. The summary's megapixels per second is worked out from its
// Megapixels and Seconds; its counts are taken as given.
func WriteReport(w io.Writer, lines []ReportLine, sum Summary) error {
	rw := newReportWriter(w, "") // the lines carry their own Pipeline
	for i := range lines {
		rw.write(&lines[i])
	}
	sum.finish(sum.Seconds)
	return rw.summary(sum)
}

// ReadReport reads a whole report: its input lines in file order and its summary. A report
// without a summary line (its run was killed), with a line that does not parse, a line
// over maxReportLine or a status that is not ok, failed or skipped is an error naming the
// line.
func ReadReport(r io.Reader) ([]ReportLine, Summary, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxReportLine)
	var lines []ReportLine
	var sum *Summary
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var l struct {
			ReportLine
			Summary *Summary `json:"summary"`
		}
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, Summary{}, fmt.Errorf("line %d: %v", n, err)
		}
		switch {
		case sum != nil:
			return nil, Summary{}, fmt.Errorf("line %d: a line after the summary", n)
		case l.Summary != nil:
			sum = l.Summary
		case l.Input == "":
			return nil, Summary{}, fmt.Errorf("line %d: neither an input line nor the summary", n)
		case l.Status != StatusOK && l.Status != StatusFailed && l.Status != StatusSkipped:
			return nil, Summary{}, fmt.Errorf("line %d: status %q is not %s, %s or %s", n, l.Status, StatusOK, StatusFailed, StatusSkipped)
		default:
			lines = append(lines, l.ReportLine)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, Summary{}, err
	}
	if sum == nil {
		return nil, Summary{}, errors.New("no summary line: the run that wrote it did not finish")
	}
	return lines, *sum, nil
}

// MergeReports merges the reports of runs over disjoint parts of one input folder (the
// shards of a job, see Shard) into one report, written to w: every input line once, in
// the folder's walk order, then one summary. The summary counts the lines; its seconds are
// the longest run's (shards run side by side), its megapixels and GPU figures the sums,
// its workers the total. Reports of different chains, and an input in two reports, are
// errors: such reports do not describe one job. names name the readers in errors.
func MergeReports(w io.Writer, names []string, rs ...io.Reader) (Summary, error) {
	var all []ReportLine
	var sum Summary
	seen := map[string]string{}
	devices := []string{}
	for i, r := range rs {
		lines, s, err := ReadReport(r)
		if err != nil {
			return Summary{}, fmt.Errorf("%s: %w", names[i], err)
		}
		if i == 0 {
			sum.Pipeline, sum.Streams, sum.Batch = s.Pipeline, s.Streams, s.Batch
		} else if s.Pipeline != sum.Pipeline {
			return Summary{}, fmt.Errorf("%s: its chain %q is not %s's %q", names[i], s.Pipeline, names[0], sum.Pipeline)
		}
		for _, l := range lines {
			if first, dup := seen[l.Input]; dup {
				return Summary{}, fmt.Errorf("%s: input %s is also in %s; merge the reports of disjoint shards", names[i], l.Input, first)
			}
			seen[l.Input] = names[i]
		}
		all = append(all, lines...)
		sum.Seconds = max(sum.Seconds, s.Seconds)
		sum.Megapixels += s.Megapixels
		sum.Workers += s.Workers
		sum.Batches += s.Batches
		sum.H2DSeconds += s.H2DSeconds
		sum.KernelSeconds += s.KernelSeconds
		sum.D2HSeconds += s.D2HSeconds
		sum.CPUFallback += s.CPUFallback
		sum.CPUStart += s.CPUStart
		sum.SetAside += s.SetAside
		sum.GPUNotStarted = sum.GPUNotStarted || s.GPUNotStarted
		sum.Interrupted = sum.Interrupted || s.Interrupted
		sum.Stopped = sum.Stopped || s.Stopped
		if s.Streams != sum.Streams || s.Batch != sum.Batch {
			sum.Streams, sum.Batch = 0, 0 // no one setting to report
		}
		if !slices.Contains(devices, s.Device) {
			devices = append(devices, s.Device)
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return walkLess(all[a].Input, all[b].Input) })
	for _, l := range all {
		switch l.Status {
		case StatusOK:
			sum.OK++
		case StatusFailed:
			sum.Failed++
		case StatusSkipped:
			sum.Skipped++
		}
	}
	sum.Device = strings.Join(devices, ",")
	return sum, WriteReport(w, all, sum)
}
