package main

import (
	"errors"
	"strings"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

// outputPrefix is what the input walk leaves out: the output folder, or, when input and
// output are prefixes of one bucket, the output's prefix inside the input's.
func outputPrefix(j *job.Job) string {
	if !blobio.IsURL(j.OutputDir) {
		return j.OutputDir
	}
	in, out := strings.TrimSuffix(j.InputDir, "/")+"/", j.OutputDir
	if rest, ok := strings.CutPrefix(out, in); ok {
		return strings.TrimSuffix(rest, "/")
	}
	return ""
}

// checkBuckets checks what the folder checks cannot look into in a job whose input or
// output is a bucket URL.
func checkBuckets(j *job.Job) error {
	inURL, outURL := blobio.IsURL(j.InputDir), blobio.IsURL(j.OutputDir)
	if !inURL && !outURL {
		return nil
	}
	switch {
	case strings.TrimSuffix(j.InputDir, "/") == strings.TrimSuffix(j.OutputDir, "/"):
		return usageError("the output is the input (%s); choose another", j.InputDir)
	case outURL && j.Report != "" && blobio.IsURL(j.Report):
		return usageError("--report %s: a report goes to a local file, or by default into the output bucket", j.Report)
	}
	return nil
}

// bucketReport tells whether the run's report goes into its output bucket, as the object
// imgpipe-report.jsonl: the output is a bucket and no report path is named.
func bucketReport(j *job.Job) bool {
	return j.Report == "" && blobio.IsURL(j.OutputDir)
}

// errNothingDone aborts the report object's write when the run did nothing.
var errNothingDone = errors.New("nothing done")
