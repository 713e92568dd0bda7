package bench

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// fakeServeIMGPIPE stands in for the CLI in serve.sh's tests: `serve` answers HTTP (GET
// /readyz) until SIGTERM, unless FAKE_NO_SERVE is set; `run`, with --server or not, writes
// NAME.jpg for each input.
const fakeServeIMGPIPE = `#!/usr/bin/env bash
[ "$1" = version ] && { echo "imgpipe v0.0.0-fake"; exit 0; }
if [ "$1" = serve ]; then
  [ -n "$FAKE_NO_SERVE" ] && { echo "imgpipe: serve: no device" >&2; exit 3; }
  while [ $# -gt 0 ]; do case $1 in --listen) listen=$2; shift 2;; *) shift;; esac; done
  d=$(mktemp -d); echo ok >"$d/readyz"
  exec python3 -m http.server "${listen##*:}" --bind "${listen%:*}" --directory "$d"
fi
while [ $# -gt 0 ]; do case $1 in -i) in=$2; shift 2;; -o) out=$2; shift 2;; *) shift;; esac; done
mkdir -p "$out"
for f in "$in"/*; do n=$(basename "$f"); echo thumb >"$out/${n%.*}.jpg"; done
`

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestServeScript(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("serve.sh needs curl")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("the stand-in server needs python3")
	}
	dir := t.TempDir()
	for name, text := range map[string]string{"imgpipe": fakeServeIMGPIPE, "vipsthumbnail": fakeVIPS} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	photos := filepath.Join(dir, "photos")
	if err := os.MkdirAll(photos, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.jpg", "b.jpeg", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(photos, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pair, ratios := `[0-9]+\.[0-9]{2}, [0-9]+\.[0-9]{2}`, `[0-9.]+, [0-9.]+`
	row := func(n string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\| ` + n + ` \| ` + pair + ` \| ` + pair + ` \| ` + ratios + ` \| ` + pair + ` \| ` + ratios + ` \|$`)
	}
	tests := []struct {
		name   string
		args   []string
		env    []string
		status int
		want   []*regexp.Regexp
	}{
		{name: "table", args: []string{"--files", "3,4"}, want: []*regexp.Regexp{row("3"), row("4"),
			regexp.MustCompile(`untimed warm-up job of 3 files: [0-9.]+ s`),
			regexp.MustCompile(`round 2, 4 files \(warm, fresh, libvips\): warm [0-9.]+, fresh [0-9.]+, libvips [0-9.]+`)}},
		{name: "no server", args: []string{"--files", "3"}, env: []string{"FAKE_NO_SERVE=1"}, status: 1,
			want: []*regexp.Regexp{regexp.MustCompile(`did not get ready:\nimgpipe: serve: no device`)}},
		{name: "bad count", args: []string{"--files", "x"}, status: 2,
			want: []*regexp.Regexp{regexp.MustCompile(`--files is a list of counts`)}},
		{name: "unknown option", args: []string{"--fast"}, status: 2,
			want: []*regexp.Regexp{regexp.MustCompile(`unknown option --fast`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve.sh", photos, "--port", strconv.Itoa(freePort(t))}, tt.args...)
			cmd := exec.Command("bash", args...)
			cmd.Env = append(os.Environ(), "IMGPIPE="+filepath.Join(dir, "imgpipe"), "VIPSTHUMBNAIL="+filepath.Join(dir, "vipsthumbnail"),
				"TMPDIR="+dir, "FAKE_LOG="+filepath.Join(t.TempDir(), "runs"))
			cmd.Env = append(cmd.Env, tt.env...)
			out, err := cmd.CombinedOutput()
			status := 0
			if ee, ok := err.(*exec.ExitError); ok {
				status = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != tt.status {
				t.Errorf("exit status %d, want %d:\n%s", status, tt.status, out)
			}
			for _, re := range tt.want {
				if !re.Match(out) {
					t.Errorf("output lacks %q:\n%s", re, out)
				}
			}
		})
	}
}
