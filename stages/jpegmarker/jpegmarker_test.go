package jpegmarker

import (
	"math/rand"
	"testing"
)

// SkipEntropy finds the first marker after entropy-coded data, skipping stuffed bytes
// (FF 00), restart markers and fill bytes, as a walk over every byte would.
func TestSkipEntropy(t *testing.T) {
	byteByByte := func(data []byte, i int) int {
		for ; i+1 < len(data); i++ {
			if m := data[i+1]; data[i] == 0xff && m != 0 && (m < 0xd0 || m > 0xd7) && m != 0xff {
				return i
			}
		}
		return len(data)
	}
	tests := []struct {
		name string
		data []byte
		want int
	}{
		{"empty", nil, 0},
		{"no marker", []byte{1, 2, 3}, 3},
		{"stuffed byte, then EOI", []byte{1, 0xff, 0, 2, 0xff, 0xd9}, 4},
		{"restart markers are data", []byte{0xff, 0xd0, 5, 0xff, 0xd7, 0xff, 0xc4}, 5},
		{"fill bytes before a marker", []byte{7, 0xff, 0xff, 0xff, 0xda}, 3},
		{"0xFF last", []byte{1, 2, 0xff}, 3},
		{"marker at the start", []byte{0xff, 0xdb, 0}, 0},
	}
	for _, tt := range tests {
		if got := SkipEntropy(tt.data, 0); got != tt.want || got != byteByByte(tt.data, 0) {
			t.Errorf("%s: SkipEntropy = %d, want %d", tt.name, got, tt.want)
		}
	}
	// Random scans, dense in 0xFF and marker bytes, from every start.
	rng := rand.New(rand.NewSource(1))
	alphabet := []byte{0, 1, 0xd0, 0xd7, 0xd8, 0xd9, 0xda, 0xff, 0xff, 0xff}
	for n := 0; n < 2000; n++ {
		data := make([]byte, rng.Intn(40))
		for i := range data {
			data[i] = alphabet[rng.Intn(len(alphabet))]
		}
		for i := 0; i <= len(data); i++ {
			if got, want := SkipEntropy(data, i), byteByByte(data, i); got != want {
				t.Fatalf("SkipEntropy(% x, %d) = %d, want %d", data, i, got, want)
			}
		}
	}
}
