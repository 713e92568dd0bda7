package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage"

	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// --gpu all, over every GPU of the host (one is enough: the run then takes the one-GPU
// path), writes the same bytes and report lines as --gpu 0 on a mixed folder, with the
// device decoding the JPEGs (auto) and the CPU the rest, and JPEG outputs from nvJPEG. Both
// wait for the GPUs (--gpu-wait): the report names each input's decoder.
func TestGPUAllMatchesGPU0(t *testing.T) {
	requireGPU0(t)
	infos, err := cudastage.Devices()
	if err != nil {
		t.Fatal(err)
	}
	in := deviceFolder(t, [2]int{1920, 1080}, [2]int{1279, 719}, [2]int{4000, 3000})
	for _, spec := range []string{
		"decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png",
		"decode | resize width=256 height=256 fit=inside filter=lanczos3 | save format=jpeg",
	} {
		t.Run(spec, func(t *testing.T) {
			run := func(gpu string) (string, []byte) {
				out := filepath.Join(t.TempDir(), "out")
				code, _, stderr := cli(t, "run", "-i", in, "-o", out, "-p", spec, "--device", "cuda", "--gpu-wait", "--gpu", gpu, "--batch", "4")
				if code != exitOK && code != exitSomeFailed {
					t.Fatalf("--gpu %s: exit %d\n%s", gpu, code, stderr)
				}
				lines, sum := readReport(t, filepath.Join(out, folderrun.ReportName))
				t.Logf("--gpu %s: %s, %d batches, per GPU %+v", gpu, sum.Device, sum.Batches, sum.GPUs)
				if len(infos) > 1 && gpu == "all" && len(sum.GPUs) != len(infos) {
					t.Errorf("--gpu all on %d GPUs: per-GPU figures %+v", len(infos), sum.GPUs)
				}
				b, _ := json.Marshal(lines)
				return out, b
			}
			one, linesOne := run("0")
			all, linesAll := run("all")
			if !bytes.Equal(linesOne, linesAll) {
				t.Errorf("report lines differ:\n--gpu 0:   %s\n--gpu all: %s", linesOne, linesAll)
			}
			fo, fa := files(t, one), files(t, all)
			delete(fo, folderrun.ReportName)
			delete(fa, folderrun.ReportName)
			if len(fo) != len(fa) || len(fo) == 0 {
				t.Fatalf("%d files with --gpu 0, %d with --gpu all", len(fo), len(fa))
			}
			for name := range fo {
				a, err1 := os.ReadFile(filepath.Join(one, name))
				b, err2 := os.ReadFile(filepath.Join(all, name))
				if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
					t.Errorf("%s differs (%v, %v)", name, err1, err2)
				}
			}
		})
	}
}

// bench raw --gpu all on the machine's GPUs: one GPU's record, then, with several, the
// record of all at once, exact on each, with the scaling over one.
func TestBenchRawAllGPUs(t *testing.T) {
	requireGPU0(t)
	infos, err := cudastage.Devices()
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := benchCLI(t, t.Context(), "bench", "raw", "--device", "cuda", "--gpu", "all", "--size", "1920x1080",
		"--frames", "96", "--batch", "8", "--warmup", "1", "--repeats", "3", "--no-cpu", "--json")
	t.Log(stderr)
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	recs := records(t, stdout)
	if want := min(len(infos), 2); len(recs) != want {
		t.Fatalf("%d records on %d GPUs, want %d", len(recs), len(infos), want)
	}
	if len(infos) == 1 {
		return
	}
	all := recs[1]
	checkSchema(t, all)
	t.Logf("%d GPUs: %.0f img/s together, %.2fx one GPU", len(infos), all["img_per_s"], all["scaling_vs_one_gpu"])
	if all["gpus"] != float64(len(infos)) || all["exact"] != true || all["scaling_vs_one_gpu"] == nil {
		t.Errorf("all GPUs' record: %v", all)
	}
}
