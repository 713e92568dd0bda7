package cutest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRequireSkipsOrFails runs Require in a child process (its outcome is
// cached per process) under both settings of IMGPIPE_REQUIRE_GPU and checks
// that the child skips or fails when there is no GPU, and passes when there is.
func TestRequireSkipsOrFails(t *testing.T) {
	if os.Getenv("CUTEST_CHILD") == "1" {
		Require(t)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, require := range []string{"0", "1"} {
		cmd := exec.Command(exe, "-test.run=^TestRequireSkipsOrFails$", "-test.v")
		cmd.Env = append(os.Environ(), "CUTEST_CHILD=1", EnvRequire+"="+require)
		out, err := cmd.CombinedOutput()
		s := string(out)
		gpu := strings.Contains(s, "--- PASS")
		switch {
		case gpu:
			if err != nil {
				t.Errorf("require=%s: passed but exited with %v:\n%s", require, err, s)
			}
		case require == "0":
			if err != nil || !strings.Contains(s, "--- SKIP") || !strings.Contains(s, "no usable GPU") {
				t.Errorf("require=0 without GPU: want a skip with the reason, got %v:\n%s", err, s)
			}
		default:
			if err == nil || !strings.Contains(s, "--- FAIL") || !strings.Contains(s, "GPU required") {
				t.Errorf("require=1 without GPU: want a failure, got %v:\n%s", err, s)
			}
		}
	}
}

// The CLI's --gpu values are valid test settings too: the tests take the first GPU.
func TestOrdinalOf(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		bad  bool
	}{
		{"", 0, false}, {"all", 0, false}, {"2", 2, false}, {" 3 ", 3, false}, {"1,0,2", 1, false},
		{"x", 0, true}, {"-1", 0, true}, {",1", 0, true},
	} {
		got, err := ordinalOf(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ordinalOf(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}
