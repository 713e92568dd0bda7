package cudastage

import (
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/jpegdec"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// The records of kernels/jpegdec.cu as Go builds them (turbodecode.go lays them out), and the
// per-image geometry of libjpeg-turbo's decompression.

// jpegImg mirrors JImg.
type jpegImg struct {
	W, H, NC, MX, MY, RI, NSeg, HMax, VMax, BPM int32
	SlotC                                       [10]int32
	HS, VS, DCT, ACT                            [3]int32
	Min, OW, OH, Gray                           int32
	SS, DW, DH, PW, PH                          [3]int32
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

// jpegGeometry fills g's sizes, per-component DCT sizes and upsamplers for a decode at scale
// 1/denom, as libjpeg-turbo's jdmaster.c and jdsample.c choose them.
func jpegGeometry(g *jpegImg, f *jpegdec.Frame, denom int) error {
	hmax, vmax := int32(f.HMax), int32(f.VMax)
	g.Min = int32(8 / denom)
	g.OW = int32((int64(f.Width)*int64(g.Min) + 7) / 8)
	g.OH = int32((int64(f.Height)*int64(g.Min) + 7) / 8)
	fancy := g.Min > 1
	for c, comp := range f.Comps {
		h, v := int32(comp.H), int32(comp.V)
		if len(f.Comps) == 1 {
			h, v = 1, 1
		}
		ss := int32(jpegturbo.IDCTSize(int(hmax), int(vmax), int(h), int(v), denom))
		g.SS[c] = ss
		g.DW[c] = int32((int64(f.Width)*int64(h*ss) + int64(hmax*8) - 1) / int64(hmax*8))
		g.DH[c] = int32((int64(f.Height)*int64(v*ss) + int64(vmax*8) - 1) / int64(vmax*8))
		g.PW[c], g.PH[c] = int32(f.MCUsX)*h*ss, int32(f.MCUsY)*v*ss
		hin, vin := h*ss/g.Min, v*ss/g.Min
		g.HE[c], g.VE[c] = 1, 1
		switch {
		case hin == hmax && vin == vmax:
			g.Up[c] = upFull
		case hin*2 == hmax && vin == vmax:
			g.Up[c] = upH2V1
			if fancy && g.DW[c] > 2 {
				g.Up[c] = upH2V1Fancy
			}
		case hin == hmax && vin*2 == vmax && fancy:
			g.Up[c] = upH1V2Fancy
		case hin*2 == hmax && vin*2 == vmax:
			g.Up[c] = upH2V2
			if fancy && g.DW[c] > 2 {
				g.Up[c] = upH2V2Fancy
			}
		case hin > 0 && vin > 0 && hmax%hin == 0 && vmax%vin == 0:
			g.Up[c], g.HE[c], g.VE[c] = upInt, hmax/hin, vmax/vin
		default:
			return fmt.Errorf("%w: no upsampler for %dx%d in %dx%d", jpegdec.ErrUnsupported, h, v, hmax, vmax)
		}
	}
	return nil
}
