package cudastage

import (
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/jpegdec"
)

// The records of kernels/jpegdec.cu as Go builds them (turbodecode.go lays them out), and the
// per-image geometry of libjpeg-turbo's decompression.

// jpegImg mirrors JImg.
type jpegImg struct {
	W, H, NC, MX, MY, RI, NSeg, HMax, VMax, BPM int32
	SlotC                                       [10]int32
	HS, VS, DCT, ACT                            [3]int32
	OW, OH, Gray                                int32
	DW, DH, PW, PH                              [3]int32
	Up, HE, VE                                  [3]int32
	Pad                                         [2]int32
	Blk0, NBlk, RGB0, NRGB                      int64
	POff                                        [3]int64
	Out                                         int64
	QT                                          [3][64]int32
}

// jpegSeg mirrors JSeg.
type jpegSeg struct {
	Start, End, Sub0, Blk0, Blocks int64
	Img, NSub                      int32
}

// jpegCtx mirrors JCtx: device addresses, then counts.
type jpegCtx struct {
	Im, Tab, W, Segs, Subseg, E0, E1, Ch0, Ch1, Cnt, Sums, Blk, Pred, Coef, Bad, BadPos, Segslow, Planes, Flag uint64
	NW, NSub, NSeg, NImg, NBlk, NRGB                                                                           int64
}

// The upsamplers of jdsample.c, as JPEG_UP_* of the kernels.
const (
	upFull = iota
	upH2V1Fancy
	upH2V1
	upH1V2Fancy
	upH2V2Fancy
	upH2V2
	upInt
)

// jpegGeometry fills g's sizes and upsamplers for a full-size decode, as libjpeg-turbo's
// jdmaster.c and jdsample.c choose them (at full size every component's IDCT is 8x8, and
// libjpeg-turbo upsamples "fancily").
func jpegGeometry(g *jpegImg, f *jpegdec.Frame) error {
	hmax, vmax := int32(f.HMax), int32(f.VMax)
	g.OW, g.OH = int32(f.Width), int32(f.Height)
	for c, comp := range f.Comps {
		h, v := int32(comp.H), int32(comp.V)
		if len(f.Comps) == 1 {
			h, v = 1, 1
		}
		g.DW[c] = int32((int64(f.Width)*int64(h) + int64(hmax) - 1) / int64(hmax))
		g.DH[c] = int32((int64(f.Height)*int64(v) + int64(vmax) - 1) / int64(vmax))
		g.PW[c], g.PH[c] = int32(f.MCUsX)*h*8, int32(f.MCUsY)*v*8
		g.HE[c], g.VE[c] = 1, 1
		switch {
		case h == hmax && v == vmax:
			g.Up[c] = upFull
		case h*2 == hmax && v == vmax:
			g.Up[c] = upH2V1
			if g.DW[c] > 2 {
				g.Up[c] = upH2V1Fancy
			}
		case h == hmax && v*2 == vmax:
			g.Up[c] = upH1V2Fancy
		case h*2 == hmax && v*2 == vmax:
			g.Up[c] = upH2V2
			if g.DW[c] > 2 {
				g.Up[c] = upH2V2Fancy
			}
		case hmax%h == 0 && vmax%v == 0:
			g.Up[c], g.HE[c], g.VE[c] = upInt, hmax/h, vmax/v
		default:
			return fmt.Errorf("%w: no upsampler for %dx%d in %dx%d", jpegdec.ErrUnsupported, h, v, hmax, vmax)
		}
	}
	return nil
}
