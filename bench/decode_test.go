package bench

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

// writeJPEGs writes n small baseline JPEGs and one corrupt one into a folder.
func writeJPEGs(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		m := image.NewRGBA(image.Rect(0, 0, 20+i, 10+i))
		for k := range m.Pix {
			m.Pix[k] = uint8(k * (i + 1))
		}
		m.Set(0, 0, color.White)
		var b bytes.Buffer
		if err := jpeg.Encode(&b, m, nil); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, string(rune('a'+i))+".jpg"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			bad := append([]byte(nil), b.Bytes()[:len(b.Bytes())/2]...)
			if err := os.WriteFile(filepath.Join(dir, "bad.jpg"), bad, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func TestDecodeBench(t *testing.T) {
	dir := writeJPEGs(t, 6)
	dev := schedtest.NewFake(schedtest.FakeConfig{DecoderEngines: 7, BatchFailsWhole: true})
	defer dev.Close()
	var text bytes.Buffer
	res, err := Decode(context.Background(), Options{Device: dev, Batch: []int{4}, Streams: []int{1, 3}, Repeats: 2, Warmup: 1, Text: &text}, dir)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]DecodeResult{}
	var streams []int
	for _, r := range res {
		byName[r.Decoder] = r
		if r.Decoder == "device" {
			streams = append(streams, r.Streams)
			if r.Images != 7 || r.Failed != 1 || r.Engines != 7 || r.ImagesPerSecond <= 0 {
				t.Errorf("device figure %+v", r)
			}
		}
	}
	if !slices.Equal(streams, []int{1, 3}) {
		t.Errorf("device figures for streams %v, want [1 3] (all %+v)", streams, res)
	}
	if g := byName["go"]; g.Images != 7 || g.Failed != 1 || g.GPixelsPerSec <= 0 {
		t.Errorf("go figure %+v", g)
	}
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("device objects left: %+v", live)
	}
	if !strings.Contains(text.String(), "3 streams, 7 hardware engines") {
		t.Errorf("text:\n%s", text.String())
	}
	if _, err := Decode(context.Background(), Options{Batch: []int{4}, Repeats: 1}, t.TempDir()); err == nil {
		t.Error("a folder without JPEGs: no error")
	}
}
