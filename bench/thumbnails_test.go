package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fakeIMGPIPE stands in for the CLI in thumbnails.sh's tests: `run` writes NAME.jpg for each
// input (its device's bytes when FAKE_DIFFER is set, else the same bytes for both devices), fails
// with status 3 on --device cuda when FAKE_NO_GPU is set, and appends its device to FAKE_LOG.
const fakeIMGPIPE = `#!/usr/bin/env bash
[ "$1" = version ] && { echo "imgpipe v0.0.0-fake"; exit 0; }
while [ $# -gt 0 ]; do case $1 in -i) in=$2; shift 2;; -o) out=$2; shift 2;; --device) dev=$2; shift 2;; *) shift;; esac; done
echo "$dev" >>"$FAKE_LOG"
if [ "$dev" = cuda ] && [ -n "$FAKE_NO_GPU" ]; then echo "imgpipe: --device cuda: no usable GPU: fake" >&2; exit 3; fi
mkdir -p "$out"; sleep 0.02
for f in "$in"/*; do n=$(basename "$f"); echo "thumb ${FAKE_DIFFER:+$dev}" >"$out/${n%.*}.jpg"; done
echo '{"summary":{}}' >"$out/imgpipe-report.jsonl"
`

// fakeVIPS stands in for vipsthumbnail: it writes DIR/NAME.jpg for each file given after
// "-s 256 -o DIR/%s.jpg[Q=..]", skipping the last one when FAKE_VIPS_SHORT is set, and appends
// "libvips" to FAKE_LOG.
const fakeVIPS = `#!/usr/bin/env bash
[ "$1" = --vips-version ] && { echo "libvips 8.14.1"; exit 0; }
echo libvips >>"$FAKE_LOG"; sleep 0.02; shift 2; pattern=${2%%\[*}; shift 2
[ -n "$FAKE_VIPS_SHORT" ] && set -- "${@:1:$(($# - 1))}"
for f in "$@"; do n=$(basename "$f"); echo v >"${pattern/\%s/${n%.*}}"; done
`

func TestThumbnailsScript(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"imgpipe": fakeIMGPIPE, "vipsthumbnail": fakeVIPS} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	photos := filepath.Join(dir, "photos", "sub")
	if err := os.MkdirAll(photos, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.jpg", "b.JPEG", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(photos, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	row := func(n, gpu, gpuRatio string) *regexp.Regexp {
		num := `[0-9]+\.[0-9]{2}`
		pair, ratios := num+`, `+num, `[0-9.]+, [0-9.]+`
		return regexp.MustCompile(`(?m)^\| ` + n + ` \| ` + pair + ` \| ` + pair + ` \| ` + ratios + ` \| ` + gpu + ` \| ` + gpuRatio +
			` \| ` + pair + ` \| ` + ratios + ` \|$`)
	}
	num, ratio := `[0-9]+\.[0-9]{2}, [0-9]+\.[0-9]{2}`, `[0-9]+\.[0-9], [0-9]+\.[0-9]`
	tests := []struct {
		name   string
		dir    string // the photos folder; "" is the one made above
		args   []string
		env    []string
		status int
		want   []*regexp.Regexp // in the output
		order  string           // when set, the runs in order (one word per libvips run, which is many processes)
	}{
		{name: "both devices", args: []string{"--files", "3,5"}, want: []*regexp.Regexp{
			row("3", num, ratio), row("5", num, ratio),
			regexp.MustCompile(`GPU against CPU thumbnails, 3 files: 0 of 3 differ\.`),
			regexp.MustCompile(`libvips 8\.14\.1; imgpipe v0\.0\.0-fake`),
			regexp.MustCompile(`round 2, 5 files \(cpu, libvips, auto, cuda\): libvips -n 30 [0-9.]+, -n [0-9]+ [0-9.]+;`),
		}, order: "libvips auto cuda cpu  auto cuda cpu libvips  cuda cpu libvips auto  cpu libvips auto cuda  cuda cpu"},
		{name: "outputs differ", args: []string{"--files", "4"}, env: []string{"FAKE_DIFFER=1"}, status: 1, want: []*regexp.Regexp{
			row("4", num, ratio), regexp.MustCompile(`4 files: 4 of 4 differ\.`),
			regexp.MustCompile(`4 GPU thumbnails differ from the CPU's`),
		}},
		{name: "no GPU", args: []string{"--files", "3"}, env: []string{"FAKE_NO_GPU=1"}, status: 1, want: []*regexp.Regexp{
			row("3", "failed, failed", "-, -"),
			regexp.MustCompile(`3 files: not compared: a run failed\.`),
			regexp.MustCompile(`imgpipe_run 3 cuda \(status 3, 0 of 3 thumbnails\):\nimgpipe: --device cuda: no usable GPU: fake`),
		}},
		{name: "libvips short of files", args: []string{"--files", "3", "--rounds", "1"}, env: []string{"FAKE_VIPS_SHORT=1"}, status: 1, want: []*regexp.Regexp{
			regexp.MustCompile(`(?m)^\| 3 \| failed \| [0-9.]+ \| - \| [0-9.]+ \| - \| [0-9.]+ \| - \|$`),
			regexp.MustCompile(`vips_run 3 30 \(status 0, 2 of 3 thumbnails\)`),
		}},
		{name: "no folder", args: []string{"--files", "3"}, dir: filepath.Join(dir, "none"), status: 2,
			want: []*regexp.Regexp{regexp.MustCompile(`none is not a folder`)}},
		{name: "bad count", args: []string{"--files", "3,x"}, status: 2,
			want: []*regexp.Regexp{regexp.MustCompile(`--files is a list of counts`)}},
		{name: "no files", args: []string{"--files", "0"}, status: 2,
			want: []*regexp.Regexp{regexp.MustCompile(`--files is a list of counts`)}},
		{name: "bad quality", args: []string{"--quality", "101"}, status: 2,
			want: []*regexp.Regexp{regexp.MustCompile(`--quality 1 to 100`)}},
		{name: "no libvips", args: []string{"--files", "3"}, env: []string{"VIPSTHUMBNAIL=" + filepath.Join(dir, "missing")}, status: 2,
			want: []*regexp.Regexp{regexp.MustCompile(`does not run: set VIPSTHUMBNAIL`)}},
		{name: "unknown option", args: []string{"--fast"}, status: 2,
			want: []*regexp.Regexp{regexp.MustCompile(`unknown option --fast`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			folder := tt.dir
			if folder == "" {
				folder = filepath.Join(dir, "photos")
			}
			cmd := exec.Command("bash", append([]string{"thumbnails.sh", folder}, tt.args...)...)
			cmd.Env = append(os.Environ(), "IMGPIPE="+filepath.Join(dir, "imgpipe"), "VIPSTHUMBNAIL="+filepath.Join(dir, "vipsthumbnail"), "TMPDIR="+dir)
			log := filepath.Join(t.TempDir(), "runs")
			cmd.Env = append(cmd.Env, "FAKE_LOG="+log)
			cmd.Env = append(cmd.Env, tt.env...)
			out, err := cmd.CombinedOutput()
			status := 0
			if err != nil {
				ee, ok := err.(*exec.ExitError)
				if !ok {
					t.Fatal(err)
				}
				status = ee.ExitCode()
			}
			if status != tt.status {
				t.Errorf("exit status %d, want %d:\n%s", status, tt.status, out)
			}
			for _, re := range tt.want {
				if !re.Match(out) {
					t.Errorf("output lacks %q:\n%s", re, out)
				}
			}
			if tt.order != "" {
				if got, want := runOrder(t, log), strings.Fields(tt.order); !slices.Equal(got, want) {
					t.Errorf("runs in order %q, want %q", got, want)
				}
			}
		})
	}
}

// runOrder reads FAKE_LOG: the devices of imgpipe's runs and "libvips" for each vipsthumbnail
// process, a libvips run's processes counted once.
func runOrder(t *testing.T, log string) []string {
	t.Helper()
	text, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, run := range strings.Fields(string(text)) {
		if run != "libvips" || len(runs) == 0 || runs[len(runs)-1] != "libvips" {
			runs = append(runs, run)
		}
	}
	return runs
}
