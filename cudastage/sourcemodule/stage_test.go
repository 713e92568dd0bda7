package sourcemodule

import (
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/userkernel"
)

func TestStageArgs(t *testing.T) {
	params := []userkernel.Scalar{{Float: true, F: 1.5}, {I: 3}, {Float: true, F: 2}}
	got := StageArgs("src", "f", userkernel.OutGray, params...)
	want := map[string]any{"source": "src", "fn": "f", "out": "gray", "args": "1.5,3,2f"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	back, err := userkernel.ParseArgs(got["args"].(string))
	if err != nil || len(back) != len(params) {
		t.Fatalf("args do not parse back: %v, %v", back, err)
	}
	for i := range params {
		if back[i] != params[i] {
			t.Errorf("arg %d: %+v, want %+v", i, back[i], params[i])
		}
	}
}
