package stages

import (
	"bytes"
	"encoding/binary"
	"image"
	"testing"

	"github.com/disintegration/imaging"
)

// orientRef applies EXIF orientation o to src the way the EXIF
// specification describes it: as the inverse map from each output pixel to
// its source pixel.
func orientRef(src *Image, o int) *Image {
	w, h := src.W, src.H
	ow, oh := w, h
	if o >= 5 {
		ow, oh = h, w
	}
	out := NewImage(ow, oh, src.C)
	for y := 0; y < oh; y++ {
		for x := 0; x < ow; x++ {
			var sx, sy int
			switch o {
			case 1:
				sx, sy = x, y
			case 2: // mirror horizontal
				sx, sy = w-1-x, y
			case 3: // rotate 180
				sx, sy = w-1-x, h-1-y
			case 4: // mirror vertical
				sx, sy = x, h-1-y
			case 5: // transpose
				sx, sy = y, x
			case 6: // rotate 90 clockwise: the left column becomes the top row
				sx, sy = y, h-1-x
			case 7: // transverse
				sx, sy = w-1-y, h-1-x
			case 8: // rotate 90 counter-clockwise
				sx, sy = w-1-y, x
			}
			for ch := 0; ch < src.C; ch++ {
				out.Pix[(y*ow+x)*src.C+ch] = at(src, sx, sy, ch)
			}
		}
	}
	return out
}

// orientFixtures are the EXIF orientation fixtures' names (without .jpg): orientation N is
// the digit after "orient_"; _le has little-endian EXIF.
var orientFixtures = []string{"orient_1", "orient_2", "orient_3", "orient_4", "orient_5", "orient_6", "orient_7", "orient_8", "orient_3_le", "orient_6_le"}

func TestDecodeOrientation(t *testing.T) {
	fx := fixtures(t)
	upright, err := Decode(fx["orient_1.jpg"], DecodeOptions{Orient: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range orientFixtures {
		t.Run(name, func(t *testing.T) {
			data := fx[name+".jpg"]
			o := int(name[len("orient_")] - '0')
			a := &paddedAlloc{pad: 7}
			got, err := Decode(data, DecodeOptions{Orient: true}, a.alloc)
			if err != nil {
				t.Fatal(err)
			}
			checkPadding(t, got)
			wantDims := image.Pt(24, 16)
			if o >= 5 {
				wantDims = image.Pt(16, 24)
			}
			if len(a.calls) != 1 || a.calls[0] != wantDims {
				t.Fatalf("alloc asked for %v, want [%v]", a.calls, wantDims)
			}
			hd, err := DecodeHeader(data, DecodeOptions{Orient: true})
			if err != nil || hd.Orientation != o || hd.W != wantDims.X || hd.H != wantDims.Y {
				t.Fatalf("header %+v, %v", hd, err)
			}
			// exiftool changed only the metadata, so the pixels are those
			// of orient_1 turned by our own reading of the EXIF spec...
			sameImage(t, got, orientRef(upright, o))
			// ...and those imaging gives with its own EXIF reader.
			ref, err := imaging.Decode(bytes.NewReader(data), imaging.AutoOrientation(true))
			if err != nil {
				t.Fatal(err)
			}
			sameImage(t, got, fromStd(ref))

			// orient=false leaves the stored pixels alone.
			raw, err := Decode(data, DecodeOptions{Orient: false}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameImage(t, raw, upright)
		})
	}
}

// byteOrder is what binary.LittleEndian and binary.BigEndian both are.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// exifJPEG builds the marker segments of a JPEG whose APP1 Exif holds an
// IFD0 with a Make tag and, unless typ is 0, an Orientation tag.
func exifJPEG(bo byteOrder, typ uint16, value uint16) []byte {
	var tiffData []byte
	if bo == byteOrder(binary.LittleEndian) {
		tiffData = []byte("II*\x00")
	} else {
		tiffData = []byte("MM\x00*")
	}
	tiffData = bo.AppendUint32(tiffData, 8)
	n := uint16(1)
	if typ != 0 {
		n = 2
	}
	tiffData = bo.AppendUint16(tiffData, n)
	// Make (0x010F, ASCII, 4 bytes inline) first, so the reader must skip it.
	tiffData = bo.AppendUint16(tiffData, 0x010F)
	tiffData = bo.AppendUint16(tiffData, 2)
	tiffData = bo.AppendUint32(tiffData, 4)
	tiffData = append(tiffData, 'a', 'b', 'c', 0)
	if typ != 0 {
		tiffData = bo.AppendUint16(tiffData, 0x0112)
		tiffData = bo.AppendUint16(tiffData, typ)
		tiffData = bo.AppendUint32(tiffData, 1)
		tiffData = bo.AppendUint16(tiffData, value)
		tiffData = append(tiffData, 0, 0)
	}
	tiffData = bo.AppendUint32(tiffData, 0) // no next IFD
	app1 := append([]byte("Exif\x00\x00"), tiffData...)
	out := []byte{0xff, 0xd8}
	out = append(out, 0xff, 0xe0, 0, 6, 'J', 'F', 'I', 'F') // an APP0 to skip
	out = append(out, 0xff, 0xff)                           // a fill byte
	out = append(out, 0xff, 0xe1)
	out = binary.BigEndian.AppendUint16(out, uint16(len(app1)+2))
	out = append(out, app1...)
	return append(out, 0xff, 0xda, 0, 2, 0xff, 0xd9)
}

func TestJPEGOrientation(t *testing.T) {
	le, be := byteOrder(binary.LittleEndian), byteOrder(binary.BigEndian)
	for o := uint16(1); o <= 8; o++ {
		for _, bo := range []byteOrder{le, be} {
			if got := jpegOrientation(exifJPEG(bo, 3, o)); got != int(o) {
				t.Errorf("%v orientation %d read as %d", bo, o, got)
			}
		}
	}
	good := exifJPEG(be, 3, 6)
	sos := append([]byte{0xff, 0xd8, 0xff, 0xda, 0, 2}, good[2:]...)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"no orientation tag", exifJPEG(le, 0, 0)},
		{"value 0", exifJPEG(le, 3, 0)},
		{"value 9", exifJPEG(be, 3, 9)},
		{"LONG type", exifJPEG(be, 4, 6)},
		{"Exif after SOS", sos},
		{"truncated segment", good[:30]},
		{"not a JPEG", append([]byte{0x89, 'P'}, good[2:]...)},
		{"empty", nil},
		{"bad byte order", bytes.Replace(good, []byte("MM\x00*"), []byte("XX\x00*"), 1)},
		{"IFD offset past end", bytes.Replace(good, []byte("MM\x00*\x00\x00\x00\x08"), []byte("MM\x00*\x7f\x00\x00\x08"), 1)},
	} {
		if got := jpegOrientation(tc.data); got != 1 {
			t.Errorf("%s: orientation %d, want 1", tc.name, got)
		}
	}
	// A count that runs past the segment stops at the end without panicking.
	long := bytes.Clone(good)
	i := bytes.Index(long, []byte("MM\x00*")) + 8
	long[i], long[i+1] = 0xff, 0xff
	if got := jpegOrientation(long); got != 6 {
		t.Errorf("entry count past the end: %d, want 6 (the tag is still in range)", got)
	}
}
