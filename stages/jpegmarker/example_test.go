package jpegmarker_test

import (
	"fmt"
	"log"
	"os"

	"github.com/imgpipe/imgpipe/stages/jpegmarker"
)

// The frame header and scans of a progressive JPEG, up to EOI; each SOS segment takes its
// scan's entropy-coded data along.
func ExampleSegments() {
	data, err := os.ReadFile("../testdata/progressive/gray.jpg")
	if err != nil {
		log.Fatal(err)
	}
	eoi := jpegmarker.Segments(data, func(m byte, seg []byte, at, end int) bool {
		if jpegmarker.IsSOF(m) || m == 0xda {
			fmt.Printf("FF%02X %d bytes\n", m, end-at)
		}
		return true
	})
	fmt.Println("EOI:", eoi)
	// Output:
	// FFC2 13 bytes
	// FFDA 47 bytes
	// FFDA 139 bytes
	// FFDA 97 bytes
	// FFDA 105 bytes
	// FFDA 17 bytes
	// FFDA 227 bytes
	// EOI: true
}
