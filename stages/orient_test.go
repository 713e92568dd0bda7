package stages

import (
	"fmt"
	"testing"
)

// TestOrientMatchesDecode checks that decoding a JPEG upright and turning it with Orient
// gives what Decode gives with its EXIF orientation applied, for every orientation.
func TestOrientMatchesDecode(t *testing.T) {
	fx := fixtures(t)
	for o := 1; o <= 8; o++ {
		t.Run(fmt.Sprint(o), func(t *testing.T) {
			data := fx[fmt.Sprintf("orient_%d.jpg", o)]
			want, err := Decode(data, DecodeOptions{Orient: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := Decode(data, DecodeOptions{Orient: false}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := NewImage(want.W, want.H, 3)
			if err := Orient(got, stored, o); err != nil {
				t.Fatal(err)
			}
			sameImage(t, got, want)
		})
	}
}

func TestOrientRefusesBadArguments(t *testing.T) {
	src := NewImage(4, 2, 3)
	cases := []struct {
		name string
		dst  *Image
		o    int
	}{
		{"orientation 0", NewImage(4, 2, 3), 0},
		{"orientation 9", NewImage(4, 2, 3), 9},
		{"not swapped for 6", NewImage(4, 2, 3), 6},
		{"swapped for 2", NewImage(2, 4, 3), 2},
		{"gray destination", NewImage(4, 2, 1), 1},
	}
	for _, c := range cases {
		if err := Orient(c.dst, src, c.o); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if err := Orient(NewImage(4, 2, 3), NewImage(4, 2, 1), 1); err == nil {
		t.Error("gray source: no error")
	}
}
