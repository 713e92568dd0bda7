package queue_test

import (
	"context"
	"fmt"
	"image"
	"image/png"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/queue"
)

// A worker that serves every job: two jobs are submitted, and Serve runs both on one
// engine, opened once, until no task of any job is left.
func ExampleServe() {
	dir, err := os.MkdirTemp("", "queue-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv := startNATS(dir)
	defer srv.Shutdown()
	nc, js, err := queue.Connect(srv.ClientURL(), "example")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	ctx := context.Background()
	plan, err := pipeline.CompileSpec("decode | grayscale | save format=png")
	if err != nil {
		log.Fatal(err)
	}
	for i, name := range []string{"photos", "scans"} {
		in := filepath.Join(dir, name)
		if err := writePNGs(in, i+1); err != nil {
			log.Fatal(err)
		}
		store, err := blobio.OpenStore(ctx, in)
		if err != nil {
			log.Fatal(err)
		}
		tasks, err := queue.ListTasks(ctx, store.Source("", pipeline.Selection{}), store)
		store.Close()
		if err != nil {
			log.Fatal(err)
		}
		job := &queue.Job{Name: name, Pipeline: plan.String(), Input: in, Output: in + "-gray", Exec: pipeline.DefaultExecution(), Settings: queue.DefaultSettings()}
		if _, err := queue.Submit(ctx, js, job, tasks); err != nil {
			log.Fatal(err)
		}
	}

	exec := pipeline.DefaultExecution()
	exec.Device = "cpu"
	eng, err := engine.Open(engine.Config{Exec: exec})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	stats, err := queue.Serve(ctx, js, eng, queue.ServeOptions{WorkOptions: queue.WorkOptions{ID: "example", IdleExit: 500 * time.Millisecond}})
	if err != nil {
		log.Fatal(err)
	}
	for _, st := range stats {
		fmt.Printf("job %s: %d tasks done, %d ok\n", st.Job, st.Done, st.Summary.OK)
	}
	// Output:
	// job photos: 1 tasks done, 1 ok
	// job scans: 2 tasks done, 2 ok
}

// A worker started before its job waits for it; with an idle limit it gives up.
func ExampleAwaitJob() {
	dir, err := os.MkdirTemp("", "queue-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv := startNATS(dir)
	defer srv.Shutdown()
	nc, js, err := queue.Connect(srv.ClientURL(), "example")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	job, err := queue.AwaitJob(context.Background(), js, "photos", 100*time.Millisecond, func(msg string) { fmt.Println(msg) })
	fmt.Println(job, err)
	// Output:
	// job photos is not submitted yet; waiting for it
	// job photos was not submitted within 100ms; exiting
	// <nil> <nil>
}

// startNATS starts an embedded JetStream server storing into dir.
func startNATS(dir string) *server.Server {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true})
	if err != nil {
		log.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		log.Fatal("the NATS server did not start")
	}
	return srv
}

// writePNGs writes n small PNGs into dir.
func writePNGs(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d.png", i)))
		if err != nil {
			return err
		}
		err = png.Encode(f, image.NewRGBA(image.Rect(0, 0, 4+i, 3)))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
