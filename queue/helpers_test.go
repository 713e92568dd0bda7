package queue

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/queue/queuetest"
)

// testChain is the chain the tests run: every stage kind, and a save.
const testChain = "decode | grayscale | blur sigma=1 | histogram | save format=png"

func startServer(t testing.TB) *natsServer { return &natsServer{queuetest.Start(t)} }

// natsServer adds a connection helper to the embedded server.
type natsServer struct{ *queuetest.Server }

func (s *natsServer) restart() { s.Restart() }

func (s *natsServer) connect(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, js, err := Connect(s.URL(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return js
}

// writeImages writes n small PNGs of distinct sizes and content, some in a subfolder, and
// returns their relative names in walk order.
func writeImages(t testing.TB, dir string, n int) []string {
	t.Helper()
	var names []string
	for i := range n {
		name := fmt.Sprintf("img%03d.png", i)
		if i%4 == 3 {
			name = "sub/" + name
		}
		m := image.NewRGBA(image.Rect(0, 0, 5+i%7, 4+i%5))
		for y := range m.Bounds().Dy() {
			for x := range m.Bounds().Dx() {
				m.Set(x, y, color.RGBA{uint8(x*40 + i), uint8(y * 50), uint8(i * 7), 255})
			}
		}
		var b bytes.Buffer
		if err := png.Encode(&b, m); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// newJob makes a job over dir's images, as submit would, with its tasks.
func newJob(t testing.TB, name, in, out string, s Settings) (*Job, []Task, *pipeline.Plan) {
	t.Helper()
	return newChainJob(t, testChain, name, in, out, s)
}

// newChainJob is newJob with another chain.
func newChainJob(t testing.TB, chain, name, in, out string, s Settings) (*Job, []Task, *pipeline.Plan) {
	t.Helper()
	steps, err := pipeline.ParseSpec(chain)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pipeline.Compile(steps)
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{Name: name, Pipeline: plan.String(), Input: in, Output: out, Exec: pipeline.DefaultExecution(), Settings: s}
	store := openStore(t, in)
	src := store.Source(out, pipeline.Selection{})
	var tasks []Task
	for {
		in, err := src.Next(context.Background())
		if err != nil {
			break
		}
		tk := Task{Index: len(tasks), Name: in.Name, OutStem: in.OutStem}
		if size, mtime, err := store.Stat(context.Background(), in.Name); err == nil {
			tk.Size, tk.ModTime = size, mtime
		}
		tasks = append(tasks, tk)
	}
	return j, tasks, plan
}

// openStore opens a folder or bucket for the test.
func openStore(t testing.TB, loc string) blobio.Store {
	t.Helper()
	st, err := blobio.OpenStore(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openSink opens a folder or bucket as the job's output.
func openSink(t testing.TB, loc string) pipeline.Sink {
	t.Helper()
	sink, closeSink, err := blobio.Output(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeSink() })
	return sink
}

// fastSettings make retries and redeliveries quick.
func fastSettings() Settings {
	return Settings{AckWait: 500 * time.Millisecond, Attempts: 2, RetryDelay: 10 * time.Millisecond}
}

// reference runs the chain over in on one machine and returns its report lines and outputs.
func reference(t *testing.T, plan *pipeline.Plan, in string) ([]pipeline.ReportLine, map[string][]byte) {
	t.Helper()
	out := t.TempDir()
	var rep bytes.Buffer
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Folder(in), pipeline.ToFolder(out), pipeline.Options{Workers: 2, Report: &rep}); err != nil {
		t.Fatal(err)
	}
	lines, _, err := pipeline.ReadReport(&rep)
	if err != nil {
		t.Fatal(err)
	}
	return lines, readTree(t, out)
}

// readTree reads every file under dir, by slash path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
