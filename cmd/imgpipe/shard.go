package main

import (
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

// folderSource is the job's input folder as a source: walked (the output folder left out)
// and, with execution.shard (--shard I/N), only the inputs of that shard.
func folderSource(j *job.Job) pipeline.Source {
	src := pipeline.Folder(j.InputDir, j.OutputDir)
	if j.Exec.Shard != "" {
		i, n, _ := pipeline.ParseShard(j.Exec.Shard) // the settings table checked it
		src = pipeline.Shard(src, i, n)
	}
	return src
}
