package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

// benchImages is the folder size of the benchmarks: enough that per-job costs (submit,
// the first pull) fade against the per-image ones.
const benchImages = 200

// BenchmarkQueue measures a job through the queue in one process: submit, one worker of
// GOMAXPROCS CPU workers, wait, against an embedded server. Compare its img/s with
// BenchmarkRunBaseline's, the same images through pipeline.Run: the difference is the
// queue's cost per image.
func BenchmarkQueue(b *testing.B) {
	srv := startServer(b)
	nc, js, err := Connect(srv.URL(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	in := b.TempDir()
	writeImages(b, in, benchImages)
	n := 0
	for b.Loop() {
		b.StopTimer()
		out := b.TempDir()
		j, tasks, plan := newJob(b, fmt.Sprintf("bench-%d", n), in, out, DefaultSettings())
		n++
		b.StartTimer()
		if _, err := Submit(context.Background(), js, j, tasks); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, _, err := Work(ctx, js, j, plan, openStore(b, in), pipeline.ToFolder(out), pipeline.Options{}, WorkOptions{ID: "bench", Poll: 100 * time.Millisecond})
			done <- err
		}()
		_, sum, err := Wait(context.Background(), js, j, nil)
		cancel()
		<-done
		if err != nil || sum.OK != benchImages {
			b.Fatalf("wait: %v, %+v", err, sum)
		}
	}
	b.ReportMetric(float64(benchImages*n)/b.Elapsed().Seconds(), "img/s")
}

// BenchmarkRunBaseline is BenchmarkQueue's images through pipeline.Run, no queue.
func BenchmarkRunBaseline(b *testing.B) {
	in := b.TempDir()
	writeImages(b, in, benchImages)
	_, _, plan := newJob(b, "baseline", in, b.TempDir(), DefaultSettings())
	n := 0
	for b.Loop() {
		b.StopTimer()
		out := b.TempDir()
		b.StartTimer()
		sum, err := pipeline.Run(context.Background(), plan, pipeline.Folder(in), pipeline.ToFolder(out), pipeline.Options{})
		if err != nil || sum.OK != benchImages {
			b.Fatalf("run: %v, %+v", err, sum)
		}
		n++
	}
	b.ReportMetric(float64(benchImages*n)/b.Elapsed().Seconds(), "img/s")
}
