package pngfast

import "testing"

// FuzzEncode encodes images of fuzzed size, channels, padding and contents
// (the contents repeated to fill the image) and checks the whole round trip
// of roundTrip. Sizes stay small enough for a fast seed run but cross block
// boundaries.
func FuzzEncode(f *testing.F) {
	f.Add(uint16(1), uint16(1), false, uint8(0), []byte{7})
	f.Add(uint16(5), uint16(3), true, uint8(2), []byte{0, 255, 1, 254})
	f.Add(uint16(65535), uint16(1), false, uint8(0), []byte("incompressible? no"))
	f.Add(uint16(300), uint16(300), true, uint8(1), []byte{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233})
	f.Fuzz(func(t *testing.T, w, h uint16, rgb bool, pad uint8, data []byte) {
		c := 1
		if rgb {
			c = 3
		}
		m := img{w: 1 + int(w)%70000, h: 1 + int(h)%400, c: c}
		if m.w*m.h*c > 1<<20 {
			m.h = max(1, (1<<20)/(m.w*c))
		}
		m.stride = m.w*c + int(pad%8)
		m.pix = make([]byte, m.stride*m.h)
		if len(data) > 0 {
			for i := range m.pix {
				m.pix[i] = data[i%len(data)] + byte(i/len(data))*byte(len(data)&1)
			}
		}
		roundTrip(t, m)
	})
}
