package pipeline

import (
	"errors"
	"io"

	"github.com/imgpipe/imgpipe/stages"
)

// The decode stage: the source of image chains, a supported image file into 8-bit RGB
// pixels (package stages decodes; codec.go routes JPEGs on a GPU run).

const stageDecode = "decode"

func init() { builtin(decodeDef) }

var decodeDef = &StageDef{
	Name: stageDecode,
	Kind: SourceKind,
	Help: "read an image file (JPEG, PNG, GIF, BMP, TIFF, WebP) into RGB",
	Doc: `Decodes each input into 8-bit RGB. Alpha is dropped (stored colour kept), palettes are
expanded, 16-bit samples become v>>8, gray becomes R=G=B. GIF gives its first frame.
The header's width×height is checked against max_pixels before any pixel memory is
allocated; bigger images fail with a clear error. JPEG EXIF orientation is applied
unless orient=false. Inputs that are already pixels (Go API) only get the pixel check.
backend=turbo decodes JPEG with libjpeg-turbo (libturbojpeg.so.0, loaded at run time),
4-5x faster than Go's decoder but not bit-identical to it (a different IDCT and chroma
upsampling), and it reads arithmetic-coded JPEGs, which Go's decoder does not; backend=go
gives the same pixels on every machine. The default, auto, is
turbo where the library loads and go otherwise (saying once how to install it); the
report names each input's decoder.
scale=1/2, 1/4 or 1/8 decodes JPEG at that size (each side rounded up) through
libjpeg-turbo's DCT scaling, which changes pixels: much less work for a thumbnail.
scale=auto, the default, shrinks on load when a resize follows right after decode, as
libvips does: it takes the smallest scale that leaves the image at least the resize's own
size with the same output size (never enlarging; see docs/geometry.md); without such a
resize it decodes at full size (written out, scale=auto then is an error: it cannot
apply). scale=1 always decodes at full size, for the resize of the full pixels. Only libjpeg-turbo scales (turbo-cuda, below, as it does): JPEGs
that Go's decoder (backend=go, CMYK fallbacks) or nvJPEG take, and other formats, are
decoded at full size.
On a GPU run, backend=auto decodes a baseline JPEG (8-bit, Huffman-coded, gray or YCbCr
4:4:4, 4:2:2, 4:2:0, 4:4:0 or 4:1:1) on the GPU with turbo-cuda, imgpipe's CUDA decoder,
which gives libjpeg-turbo's bytes at libjpeg-turbo's scales (so the CPU run's, where
libjpeg-turbo loads); other JPEGs go to nvJPEG's hardware engines when those take them and
they get no scale, else to the CPU workers. backend=nvjpeg sends every JPEG nvJPEG takes to
nvJPEG, at full size.
max_pixels applies to the full size. The report's decode_scale gives each input's scale
(absent at full size); its width and height are the scaled ones.`,
	Params: []ParamSpec{
		{Name: "max_pixels", Kind: Int, Default: int64(stages.DefaultMaxPixels), Range: &Range{Min: 1, Max: 1 << 40},
			Help: "refuse images with more pixels than this (width×height)"},
		{Name: "orient", Kind: Bool, Default: true,
			Help: "apply the JPEG EXIF orientation"},
		{Name: "backend", Kind: Enum, Default: string(DecodeAuto), Values: decodeBackends(),
			Help: "JPEG decoder: auto (turbo if it loads, else go; on a GPU run turbo-cuda, libjpeg-turbo's bytes on the GPU, then nvJPEG's engines), go (same pixels everywhere), turbo (libjpeg-turbo) or nvjpeg (every JPEG nvJPEG takes)"},
		{Name: "scale", Kind: Enum, Default: scaleAuto, Values: decodeScales(),
			Help: "JPEG DCT scale (libjpeg-turbo only; changes pixels): auto (shrink on load from a resize right after decode, else full size), 1, 1/2, 1/4 or 1/8"},
	},
	NewDecoder: func(p Params) (*Decoder, error) {
		backend := DecodeBackend(p.Str("backend"))
		opt := stages.DecodeOptions{MaxPixels: p.Int("max_pixels"), Orient: p.Bool("orient"), JPEG: backend.CPU()}
		if err := opt.JPEG.Check(); err != nil {
			return nil, err
		}
		var note string
		opt.JPEG, note = stages.ResolveJPEGBackend(opt.JPEG) // once per run, not per file
		dec := &Decoder{
			Backend:   backend,
			CPUJPEG:   string(opt.JPEG),
			Header:    func(data []byte) (stages.Header, error) { return stages.CheckFile(data, opt) },
			MaxPixels: opt.MaxPixels,
			Note:      note,
			AutoScale: p.Str("scale") == scaleAuto,
			Cost: func(head []byte, size int64) (stages.Cost, error) {
				return stages.DecodeCost(head, size, opt)
			},
			Head: func(head []byte) error {
				if len(head) == 0 {
					return nil // Decode says "empty file"
				}
				if stages.Sniff(head) == "" {
					return stages.ErrUnknownFormat
				}
				// The header may lie beyond the head; only a definite "too large" counts.
				if _, err := stages.DecodeHeader(head, opt); errors.Is(err, stages.ErrTooLarge) {
					return err
				}
				return nil
			},
		}
		if denom := scaleDenom(p.Str("scale")); denom > 1 {
			dec.Scale = func(int, int) int { return denom }
		}
		dec.Decode = func(data []byte, alloc stages.Alloc) (*stages.Image, Decoded, error) {
			o := opt
			o.Scale = dec.Scale // read at each call: Compile sets it for scale=auto
			m, by, err := stages.DecodeBy(data, o, alloc)
			d := Decoded{Decoder: string(by.Backend)}
			if by.Scale > 1 {
				d.Scale = ScaleName(by.Scale)
			}
			return m, d, err
		}
		dec.DecodeStream = func(head []byte, file io.ReaderAt, size int64, alloc stages.Alloc) (*stages.Image, Decoded, error) {
			m, err := stages.DecodeStream(head, file, size, opt, alloc) // Go's decoders: no scale
			return m, Decoded{Decoder: string(stages.JPEGGo)}, err
		}
		return dec, nil
	},
}
