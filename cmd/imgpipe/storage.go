package main

import (
	"context"
	"io"
	"strings"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/job"
	"github.com/imgpipe/imgpipe/stages"
)

// inputSource is the job's input folder or bucket as a source: walked (the output folder
// left out) and, with execution.shard (--shard I/N), only the inputs of that shard.
func inputSource(ctx context.Context, j *job.Job) (pipeline.Source, blobio.Store, error) {
	store, err := blobio.OpenStore(ctx, j.InputDir)
	if err != nil {
		return nil, nil, fatalError("input: %v", err)
	}
	src := store.Source(outputPrefix(j))
	if j.Exec.Shard != "" {
		i, n, _ := pipeline.ParseShard(j.Exec.Shard) // the settings table checked it
		src = pipeline.Shard(src, i, n)
	}
	return src, store, nil
}

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

// checkBuckets checks a job whose input or output is a bucket URL, which the folder
// checks cannot look into; handled tells whether it did.
func checkBuckets(j *job.Job) (handled bool, err error) {
	inURL, outURL := blobio.IsURL(j.InputDir), blobio.IsURL(j.OutputDir)
	if !inURL && !outURL {
		return false, nil
	}
	switch {
	case strings.TrimSuffix(j.InputDir, "/") == strings.TrimSuffix(j.OutputDir, "/"):
		return true, usageError("the output is the input (%s); choose another", j.InputDir)
	case outURL && j.Exec.Resume:
		return true, usageError("--resume with a bucket output is not supported; run again without it (outputs are overwritten with the same bytes)")
	case outURL && j.Report != "" && blobio.IsURL(j.Report):
		return true, usageError("--report %s: a report goes to a local file, or by default into the output bucket", j.Report)
	}
	return true, nil
}

// writeReport writes the run's report atomically: to its file, or, for a bucket output
// without a report path, as the object imgpipe-report.jsonl of the bucket.
func writeReport(ctx context.Context, j *job.Job, path string, write func(io.Writer) error) error {
	if j.Report == "" && blobio.IsURL(j.OutputDir) {
		return blobio.WriteObject(ctx, j.OutputDir, defaultReportName, write)
	}
	return stages.WriteFileAtomic(path, write)
}
