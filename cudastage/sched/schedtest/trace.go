package schedtest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// TraceEvent is one event of the Chrome trace that sched.Trace writes, as tests read it back.
type TraceEvent struct {
	Name, Ph string
	Tid      int
	Args     map[string]any
}

// TraceEvents writes tr as JSON and reads its events back, failing t if either step fails.
func TraceEvents(t testing.TB, tr *sched.Trace) []TraceEvent {
	t.Helper()
	var b bytes.Buffer
	if err := tr.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var file struct{ TraceEvents []TraceEvent }
	if err := json.Unmarshal(b.Bytes(), &file); err != nil {
		t.Fatal(err)
	}
	return file.TraceEvents
}
