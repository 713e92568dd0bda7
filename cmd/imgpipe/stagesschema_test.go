package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

// TestStagesJSONSchema checks that `imgpipe stages --json-schema` prints job.Schema of the
// CLI's registry, and that it refuses what it cannot combine.
func TestStagesJSONSchema(t *testing.T) {
	code, stdout, stderr := cli(t, "stages", "--json-schema")
	if code != exitOK {
		t.Fatalf("stages --json-schema: exit %d: %s", code, stderr)
	}
	var got, want any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stages --json-schema is not JSON: %v", err)
	}
	data, err := json.Marshal(job.Schema(pipeline.Builtin))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("stages --json-schema differs from job.Schema(pipeline.Builtin)")
	}
	if !strings.Contains(stdout, job.SchemaDialect) || !strings.Contains(stdout, `"resize"`) {
		t.Errorf("the schema names no dialect or no resize stage:\n%.400s", stdout)
	}
	for _, args := range [][]string{{"stages", "--json-schema", "blur"}, {"stages", "--json-schema", "--json"}} {
		if code, _, stderr := cli(t, args...); code != exitUsage || !strings.Contains(stderr, "--json-schema") {
			t.Errorf("%v: exit %d, %q; want exit %d naming --json-schema", args, code, stderr, exitUsage)
		}
	}
}
