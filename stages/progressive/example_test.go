package progressive_test

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/imgpipe/imgpipe/stages/progressive"
)

// A progressive JPEG decoded at 1/8 becomes a sequential one: one scan, SOF0, the DC
// coefficients of the luma and the chroma coefficients that a 2x2 inverse DCT reads. A file
// that is not progressive is left to the caller.
func ExampleSequential() {
	data, err := os.ReadFile("../testdata/progressive/p420.jpg")
	if err != nil {
		log.Fatal(err)
	}
	seq, err := progressive.Sequential(nil, data, 8)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("scans:", bytes.Count(data, []byte{0xff, 0xda}), "->", bytes.Count(seq, []byte{0xff, 0xda}))
	fmt.Println("sequential:", bytes.Contains(seq, []byte{0xff, 0xc0}))

	baseline, err := os.ReadFile("../testdata/sub420.jpg")
	if err != nil {
		log.Fatal(err)
	}
	_, err = progressive.Sequential(nil, baseline, 8)
	fmt.Println(errors.Is(err, progressive.ErrUnsupported), err)
	// Output:
	// scans: 10 -> 1
	// sequential: true
	// true progressive: not a JPEG this package rewrites: marker FFC0
}
