package sched

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestStatsAdd(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	// Two ops and an encoding last op's second D2H: durations H2D, decode, op a, op b, D2H,
	// D2H of the files.
	s := Stats{Ops: []OpTime{{Op: "a"}, {Op: "b"}}}
	ph := phases(2, true)
	s.add(ms(10), ms(16), ph, []time.Duration{ms(2), 0, ms(1), ms(2), ms(0.5), ms(0.5)},
		batchStats{images: 4, pixels: 1000, h2dBytes: 300, d2hBytes: 100})
	s.add(ms(12), ms(18.5), ph, []time.Duration{ms(2), ms(0.25), ms(0.5), ms(1.5), ms(1), ms(0.5)},
		batchStats{images: 2, files: 2, fileBytes: 70, decodeFailed: 1, pixels: 500, h2dBytes: 150, d2hBytes: 50})
	want := Stats{Batches: 2, Images: 6, Files: 2, FileBytes: 70, DecodeFailed: 1, Pixels: 1500, H2DBytes: 450, D2HBytes: 150,
		H2D: ms(4), Decode: ms(0.25), Kernels: ms(5), D2H: ms(2.5), Wall: ms(8.5)}
	if s.Batches != want.Batches || s.Images != want.Images || s.Pixels != want.Pixels ||
		s.H2DBytes != want.H2DBytes || s.D2HBytes != want.D2HBytes ||
		s.Files != want.Files || s.FileBytes != want.FileBytes || s.DecodeFailed != want.DecodeFailed {
		t.Errorf("counts %+v", s)
	}
	if s.H2D != want.H2D || s.Decode != want.Decode || s.Kernels != want.Kernels || s.D2H != want.D2H || s.Wall != want.Wall {
		t.Errorf("times H2D %v decode %v kernels %v D2H %v wall %v, want %v %v %v %v %v", s.H2D, s.Decode, s.Kernels, s.D2H, s.Wall,
			want.H2D, want.Decode, want.Kernels, want.D2H, want.Wall)
	}
	if s.Ops[0].Total != ms(1.5) || s.Ops[1].Total != ms(3.5) {
		t.Errorf("op totals %v", s.Ops)
	}
	if got := s.Overlap(); math.Abs(got-8.5/5) > 1e-9 {
		t.Errorf("Overlap = %v, want %v", got, 8.5/5)
	}
	if s.Bottleneck() != "kernels" {
		t.Errorf("Bottleneck = %q", s.Bottleneck())
	}
	if got := s.GPixelsPerSec(); math.Abs(got-1500/0.0085/1e9) > 1e-12 {
		t.Errorf("GPixelsPerSec = %v", got)
	}
	if !strings.Contains(s.String(), "overlap efficiency 1.70") {
		t.Errorf("String = %q", s.String())
	}
}

func TestOverlap(t *testing.T) {
	tests := []struct {
		name                           string
		h2d, decode, kernels, d2h, wal time.Duration
		want                           float64
		bottleneck                     string
	}{
		{"empty", 0, 0, 0, 0, 0, 0, ""},
		{"perfect", 100, 0, 50, 40, 100, 1, "h2d"},
		{"serial", 100, 0, 50, 50, 200, 2, "h2d"},
		{"kernel bound", 10, 0, 80, 10, 92, 1.15, "kernels"},
		{"d2h bound", 10, 0, 20, 30, 60, 2, "d2h"},
		{"decode bound", 10, 90, 20, 30, 180, 2, "decode"},
	}
	for _, tt := range tests {
		s := Stats{H2D: tt.h2d, Decode: tt.decode, Kernels: tt.kernels, D2H: tt.d2h, Wall: tt.wal}
		if got := s.Overlap(); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: Overlap = %v, want %v", tt.name, got, tt.want)
		}
		if got := s.Bottleneck(); got != tt.bottleneck {
			t.Errorf("%s: Bottleneck = %q, want %q", tt.name, got, tt.bottleneck)
		}
	}
	if (Stats{}).GPixelsPerSec() != 0 {
		t.Error("GPixelsPerSec of nothing is not 0")
	}
}
