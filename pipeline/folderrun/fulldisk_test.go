package folderrun_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// tinyDisk mounts a 1 MiB tmpfs for the test, or skips it where the test may not mount
// (not root, no CAP_SYS_ADMIN).
func tinyDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	return dir
}

// On a disk that fills up, each input whose output does not fit fails with the reason and
// every output written is whole; a resumed run on the full disk, which cannot write its
// journal, keeps the previous report.
func TestFullDisk(t *testing.T) {
	disk := tinyDisk(t)
	in, out := filepath.Join(t.TempDir(), "in"), filepath.Join(disk, "out")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 40 { // 40 incompressible 30 KB outputs: more than the disk holds
		m := image.NewRGBA(image.Rect(0, 0, 100, 100))
		for j := range m.Pix {
			m.Pix[j] = byte(rng.UintN(256))
		}
		var b bytes.Buffer
		if err := png.Encode(&b, m); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(in, string(rune('a'+i/26))+string(rune('a'+i%26))+".png"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := pipeline.CompileSpec("decode | save format=png")
	if err != nil {
		t.Fatal(err)
	}
	ex := pipeline.DefaultExecution()
	ex.Device = "cpu"
	sum, err := folderrun.Run(context.Background(), folderrun.Request{Plan: plan, Input: in, Output: out, Exec: ex})
	if err != nil || sum.OK == 0 || sum.Failed == 0 {
		t.Fatalf("%d ok, %d failed, %v: want the disk to fill midway", sum.OK, sum.Failed, err)
	}
	report := filepath.Join(out, folderrun.ReportName)
	lines, _ := readReportFile(t, report)
	for _, l := range lines {
		switch {
		case l.Status == pipeline.StatusFailed && !strings.Contains(l.Error, "no space left on device"):
			t.Errorf("%s failed without the reason: %s", l.Input, l.Error)
		case l.Status == pipeline.StatusOK:
			f, err := os.Open(filepath.Join(out, l.Output))
			if err == nil {
				_, err = png.Decode(f)
				f.Close()
			}
			if err != nil {
				t.Errorf("output %s is not whole: %v", l.Output, err)
			}
		}
	}
	previous, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	fill, err := os.Create(filepath.Join(disk, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = fill.Write(make([]byte, 4096))
	}
	fill.Close()
	ex.Resume = true
	_, err = folderrun.Run(context.Background(), folderrun.Request{Plan: plan, Input: in, Output: out, Exec: ex})
	if err == nil {
		t.Error("a resumed run on a full disk: no error")
	}
	if now, _ := os.ReadFile(report); !bytes.Equal(now, previous) {
		t.Errorf("the previous report was lost: %d bytes, were %d (%v)", len(now), len(previous), err)
	}
}

func readReportFile(t *testing.T, p string) ([]pipeline.ReportLine, pipeline.Summary) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, sum, err := pipeline.ReadReport(f)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return lines, sum
}
