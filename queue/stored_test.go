package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

// storedTestJob is a job whose every execution setting differs from its zero value, with
// its tasks, digested and published.
func storedTestJob(t *testing.T) (Job, []Task) {
	t.Helper()
	j := Job{Name: "old", Pipeline: "decode | grayscale | save", Input: "/in", Output: "/out", Report: "/out/report.jsonl",
		Exec: pipeline.Execution{Device: "cuda", GPU: "0,2", Streams: 3, Batch: 7, PinnedMB: 64, GPUWait: true, MaxMemoryMB: 512,
			Workers: 5, OnError: "fail", Resume: true, Trace: "t.json", Shard: "1/4"},
		Settings: Settings{AckWait: 30 * time.Second, Attempts: 3, RetryDelay: time.Second}}
	v := reflect.ValueOf(j.Exec)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test job leaves Execution.%s zero: give it a value, so that the tests cover it", v.Type().Field(i).Name)
		}
	}
	tasks := []Task{{Index: 0, Name: "a.png", OutStem: "a", Size: 10, ModTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{Index: 1, Name: "b/c.jpg", OutStem: "b/c", Size: 20, ModTime: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)}}
	j.digest(tasks)
	j.Created, j.Published = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), true
	return j, tasks
}

// oldRecord is storedTestJob as imgpipe stored it before the record took YAML's names: exec
// under pipeline.Execution's Go field names.
const oldRecord = `{"name":"old","pipeline":"decode | grayscale | save","input":"/in","output":"/out","report":"/out/report.jsonl",` +
	`"exec":{"Device":"cuda","GPU":"0,2","Streams":3,"Batch":7,"PinnedMB":64,"GPUWait":true,"MaxMemoryMB":512,"Workers":5,"OnError":"fail","Resume":true,"Trace":"t.json","Shard":"1/4"},` +
	`"settings":{"ack_wait":30000000000,"attempts":3,"retry_delay":1000000000},"tasks":2,` +
	`"digest":"9c0cd8aa3b18c78b7650480d96ab64efb54ef5a61f3cf4fa3b03ce912000e4a0","created":"2026-03-04T05:06:07Z","published":true}`

// A job's record reads back as the job, and its exec object has the keys of the execution
// settings table (a YAML job's execution mapping), in the table's order.
func TestStoredJobRoundTrip(t *testing.T) {
	j, _ := storedTestJob(t)
	rec, err := json.Marshal(&j)
	if err != nil {
		t.Fatal(err)
	}
	var back Job
	if err := json.Unmarshal(rec, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, j) {
		t.Errorf("read back\n%+v\nwant\n%+v\nfrom %s", back, j, rec)
	}
	var want []string
	for _, ps := range pipeline.ExecutionSettings() {
		want = append(want, ps.Name)
	}
	if got := execKeys(t, rec); !slices.Equal(got, want) {
		t.Errorf("exec keys %q, want the settings' names %q", got, want)
	}
}

// execKeys returns the keys of a record's exec object, in the order written (its values
// are scalars).
func execKeys(t *testing.T, rec []byte) []string {
	t.Helper()
	var top struct{ Exec json.RawMessage }
	if err := json.Unmarshal(rec, &top); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(top.Exec))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("exec %s is not an object", top.Exec)
	}
	var keys []string
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key.(string))
	}
	return keys
}

// A record stored by an older imgpipe (Go field names) reads as the same job, with the same
// digest: a second submit of it matches, and its default name is unchanged.
func TestStoredJobOldRecord(t *testing.T) {
	j, tasks := storedTestJob(t)
	var old Job
	if err := json.Unmarshal([]byte(oldRecord), &old); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(old, j) {
		t.Errorf("old record read as\n%+v\nwant\n%+v", old, j)
	}
	if old.Digest != j.Digest {
		t.Errorf("digest %s, the old record has %s", j.Digest, old.Digest)
	}
	if got, want := DefaultName(j, tasks), "job-"+old.Digest[:12]; got != want {
		t.Errorf("default name %s, an older imgpipe gave %s", got, want)
	}
}

// LoadJob reads an old record from the jobs bucket; a record naming a setting this version
// does not have fails with a message that says so.
func TestLoadJobStoredForms(t *testing.T) {
	js := startServer(t).connect(t)
	ctx := context.Background()
	kv, err := setup(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	j, _ := storedTestJob(t)
	if _, err := kv.Put(ctx, "old", []byte(oldRecord)); err != nil {
		t.Fatal(err)
	}
	got, err := LoadJob(ctx, js, "old")
	if err != nil || !reflect.DeepEqual(*got, j) {
		t.Errorf("LoadJob of the old record = %+v, %v; want %+v", got, err, j)
	}
	future := strings.Replace(oldRecord, `"Shard":"1/4"`, `"Shard":"1/4","hdr_mode":"pq"`, 1)
	if _, err := kv.Put(ctx, "future", []byte(future)); err != nil {
		t.Fatal(err)
	}
	_, err = LoadJob(ctx, js, "future")
	if err == nil || !strings.Contains(err.Error(), `job future: stored record: exec: "hdr_mode" is no execution setting of this imgpipe`) {
		t.Errorf("LoadJob of a record with an unknown setting: %v, want a refusal naming it", err)
	}
}
