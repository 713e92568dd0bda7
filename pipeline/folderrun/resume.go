package folderrun

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

// resume applies execution.resume to src: the earlier reports mark the inputs they list as
// done under the plan, and whose outputs are still there, as skipped (see
// pipeline.Resume). The earlier reports are the files at paths (newest first; those that
// do not exist are passed over) or, when the report goes into the output bucket, that
// object (a bucket has no journal). The function returned closes the reports and the
// output.
func (p *Prepared) resume(ctx context.Context, src pipeline.Source, paths []string) (pipeline.Source, func(), error) {
	r := &p.req
	if !r.Exec.Resume {
		return src, func() {}, nil
	}
	var prev []*os.File
	var err error
	if r.bucketReport() {
		prev, err = fetchReport(ctx, r.Output)
	} else {
		prev, err = openReports(paths...)
	}
	if err != nil {
		return nil, nil, failf("--resume: %v", err)
	}
	has, closeOut, err := blobio.Outputs(ctx, r.Output)
	if err != nil {
		closeAll(prev)
		return nil, nil, failf("--resume: output: %v", err)
	}
	if len(prev) == 0 {
		r.info("--resume: no previous report at %s; processing every input", r.ReportPath())
	}
	readers := make([]io.Reader, len(prev))
	for i, f := range prev {
		readers[i] = f
	}
	return pipeline.ResumeOutputs(src, r.Plan, has, readers...), func() { closeAll(prev); closeOut() }, nil
}

// fetchReport copies the report object of the output bucket out into a temporary file
// (removed at once; it lives while open), so that resume reads it at its own pace over a
// long run without holding a download open, and while the run writes the object anew. It
// returns no file when there is no report object.
func fetchReport(ctx context.Context, bucket string) ([]*os.File, error) {
	f, err := os.CreateTemp("", "imgpipe-previous-report-*.jsonl")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	found, err := blobio.CopyObject(ctx, bucket, ReportName, f)
	if err == nil && found {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil || !found {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("the previous report in %s: %v", bucket, err)
		}
		return nil, nil
	}
	return []*os.File{f}, nil
}

// removeTemps removes the temporary files a killed run left (see stages.IsTempName): under
// the output folder, and beside each of files (the report, a named output file; "" for
// none) for its own name. It returns how many it removed. Only exact temporary names of
// WriteFileAtomic are taken, so no user file can go.
func removeTemps(outDir string, files ...string) (int, error) {
	n := 0
	if outDir != "" {
		var err error
		if n, err = stages.RemoveTemps(outDir); err != nil {
			return n, err
		}
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		m, err := stages.RemoveTempsOf(f)
		if n += m; err != nil {
			return n, err
		}
	}
	return n, nil
}
