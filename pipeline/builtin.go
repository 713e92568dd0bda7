package pipeline

import (
	"errors"
	"io"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/libwebp"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// The builtin stages. Their semantics are those of DESIGN.md ("Reference semantics"); the
// implementations live in package stages. Every other part of the engine and the CLI learns
// about stages from these definitions only.

// Stage names, shared by the definitions and the typed builder below.
const (
	stageDecode    = "decode"
	stageGrayscale = "grayscale"
	stageBlur      = "blur"
	stageBoxBlur   = "boxblur"
	stageTranspose = "transpose"
	stageHistogram = "histogram"
	stageSave      = "save"
)

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
scale=auto needs a resize right after decode, and takes the smallest scale that leaves
the image at least the resize's own size with the same output size (never enlarging;
see docs/geometry.md). Only libjpeg-turbo scales (turbo-cuda, below, as it does): JPEGs
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
		{Name: "scale", Kind: Enum, Default: "1", Values: decodeScales(),
			Help: "JPEG DCT scale (libjpeg-turbo only; changes pixels): 1, 1/2, 1/4, 1/8, or auto from the resize that follows"},
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

var grayscaleDef = &StageDef{
	Name: stageGrayscale,
	Kind: PixelKind,
	Help: "RGB to gray: Y = (9798·R + 19235·G + 3735·B + 16384) >> 15",
	Doc: `Converts RGB to one channel with integer weights that sum to 32768; bit-exact with
OpenCV's cvtColor(RGB2GRAY) on 8-bit images. On a gray image it is the identity.`,
	Shape: func(in stages.Shape, _ Params) (stages.Shape, bool) {
		if in.C == 1 {
			return in, true
		}
		return stages.Shape{W: in.W, H: in.H, C: 1}, false
	},
	CPU: func(Params) (CPUFunc, error) {
		return func(dst, src *stages.Image, _ *[256]uint64) {
			if dst != nil {
				stages.Grayscale(dst, src)
			}
		}, nil
	},
	GPU: NoLaunchArgs,
}

var blurDef = &StageDef{
	Name: stageBlur,
	Kind: PixelKind,
	Help: "Gaussian blur of each channel, integer taps, replicated borders",
	Doc: `Separable Gaussian with radius r = max(1, ceil(3·sigma)) and integer taps, computed
once per run: g_i = exp(-i²/(2·sigma²)) in float64 for i in [-r, r], w_i = round(g_i/Σg ·
16384) with halves away from zero, then w_0 += 16384 - Σw so the taps sum to 16384.
Borders replicate the edge pixels (coordinates clamped). Horizontal pass: h = Σ w_i ·
p(x+i, y), stored as h16 = (h + 32) >> 6. Vertical pass: v = Σ w_j · h16(x, y+j), output
(v + 2^21) >> 22. Exact integer arithmetic, so CPU and GPU give the same bits.`,
	Params: []ParamSpec{
		{Name: "sigma", Kind: Float, Default: 1.0, Range: &Range{Min: 0, Max: stages.MaxBlurSigma, MinOpen: true},
			Help: "standard deviation in pixels"},
	},
	Shape: sameShape,
	CPU: func(p Params) (CPUFunc, error) {
		taps := stages.BlurTaps(p.Float("sigma"))
		return func(dst, src *stages.Image, _ *[256]uint64) {
			stages.Blur(dst, src, taps)
		}, nil
	},
	GPU: func(p Params) (any, error) { return stages.BlurTaps(p.Float("sigma")), nil },
}

var boxBlurDef = &StageDef{
	Name: stageBoxBlur,
	Kind: PixelKind,
	Help: "mean over a (2·radius+1)² window of each channel",
	Doc: `out = floor(sum / count) over the in-bounds pixels of the window, so borders average
fewer pixels. radius=1 is the 3×3 mean.`,
	Params: []ParamSpec{
		{Name: "radius", Kind: Int, Default: int64(1), Range: &Range{Min: 0, Max: stages.MaxBoxRadius},
			Help: "window radius in pixels"},
	},
	Shape: sameShape,
	CPU: func(p Params) (CPUFunc, error) {
		r := int(p.Int("radius"))
		return func(dst, src *stages.Image, _ *[256]uint64) {
			stages.BoxBlur(dst, src, r)
		}, nil
	},
	GPU: func(p Params) (any, error) { return int(p.Int("radius")), nil },
}

var transposeDef = &StageDef{
	Name: stageTranspose,
	Kind: PixelKind,
	Help: "swap rows and columns: out(x, y) = in(y, x)",
	Doc:  `Width and height swap; channels are kept.`,
	Shape: func(in stages.Shape, _ Params) (stages.Shape, bool) {
		return stages.Shape{W: in.H, H: in.W, C: in.C}, false
	},
	CPU: func(Params) (CPUFunc, error) {
		return func(dst, src *stages.Image, _ *[256]uint64) {
			stages.Transpose(dst, src)
		}, nil
	},
	GPU: NoLaunchArgs,
}

var histogramDef = &StageDef{
	Name:      stageHistogram,
	Kind:      PixelKind,
	Histogram: true,
	Help:      "count the 256 gray levels (luma of RGB) into the report",
	Doc: `Counts values of a gray image, or the grayscale formula's Y of an RGB image, into 256
bins. The image passes through unchanged; the counts go to the report.`,
	Shape: func(in stages.Shape, _ Params) (stages.Shape, bool) { return in, true },
	CPU: func(Params) (CPUFunc, error) {
		return func(_, src *stages.Image, hist *[256]uint64) {
			stages.Histogram(hist, src)
		}, nil
	},
	GPU: NoLaunchArgs,
}

// pngCompressions are save's compression settings. The default, fast, is imgpipe's own encoding
// (stages/pngfast, docs/png-fast.md): Sub filter and Huffman-only deflate in independent blocks,
// the same bytes on CPU and GPU, several times faster than zlib level 1 with files about as small
// on photos. Every setting is lossless.
var pngCompressions = []string{"fast", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

var saveDef = &StageDef{
	Name: stageSave,
	Kind: SinkKind,
	Help: "write the image into the output folder (PNG, JPEG, WebP, TIFF or NumPy .npy)",
	Doc: `Writes the image under the output folder at the input's relative path with the
extension replaced (.png, .jpg, .webp, .tif or .npy). Writes are atomic: a temporary
file, fsync, rename (committed in groups, with one sync of the file system per group), so
an output is never partial. When several inputs in one folder
share a stem (a.jpg, a.png), each is saved as stem.origext.fmt (a.jpg.png, a.png.png).
png and tiff are lossless (gray stays gray; TIFF RGB carries an opaque alpha sample);
jpeg is baseline 4:2:0, encoded by libjpeg-turbo where libturbojpeg.so.0 loads (the
report's encoder says "jpeg-turbo"), on a GPU run too, so that its files are the CPU run's
bytes; without it by Go's image/jpeg ("jpeg"), whose bytes differ, and on a GPU run with
nvJPEG, outputs of at least 512×512 pixels by nvJPEG at the same quality and 4:2:0
("nvjpeg"); webp is lossy at quality, or lossless with lossless=true
(libwebp.so.7, loaded at run time; IMGPIPE_LIBWEBP names another file; gray is
written as RGB); npy is the uint8 array of shape (H, W, C) that numpy.load returns as
is, C = 1 included.`,
	Params: []ParamSpec{
		{Name: "format", Kind: Enum, Default: stages.SaveFormats()[0], Values: stages.SaveFormats(),
			Help: "file format; png, tiff, npy and webp lossless=true are lossless"},
		{Name: "quality", Kind: Int, Default: int64(stages.DefaultJPEGQuality), Range: &Range{Min: 1, Max: 100},
			Help: "JPEG and lossy WebP quality"},
		{Name: "lossless", Kind: Bool, Default: false,
			Help: "WebP: lossless instead of quality"},
		{Name: "compression", Kind: Enum, Default: "fast", Values: pngCompressions,
			Help: "PNG: fast (imgpipe's own Huffman-only encoding, same bytes on CPU and GPU), 1..9 zlib level, 0 stores; TIFF: 0 stores, else Deflate"},
	},
	NewEncoder: func(p Params) (*Encoder, error) {
		opt := stages.SaveOptions{Format: p.Str("format"), Quality: int(p.Int("quality")), Lossless: p.Bool("lossless")}
		switch c := p.Str("compression"); c {
		case "fast":
			opt.Compression = stages.PNGFast
		case "0":
			opt.Compression = stages.PNGNoCompression
		default:
			opt.Compression = int(c[0] - '0')
		}
		if err := opt.Validate(); err != nil {
			return nil, err
		}
		if opt.Format == "webp" {
			// Found when the chain is compiled, before anything runs: a spec error that says
			// how to install the library.
			if err := libwebp.Available(); err != nil {
				return nil, err
			}
		}
		enc := &Encoder{Ext: stages.FormatExt(opt.Format), Name: encoderName(opt), Options: opt, Encode: func(w io.Writer, m *stages.Image) error {
			return stages.Encode(w, m, opt)
		}}
		if opt.Format == npyFormat {
			enc.EncodeArray, enc.ArrayName = npy.Write, "npy-float32"
		}
		if enc.Name == pngFast {
			enc.DeviceOp = pngFastOp()
		}
		return enc, nil
	},
}

func sameShape(in stages.Shape, _ Params) (stages.Shape, bool) { return in, false }

// Builtin is the registry of the builtin stages.
var Builtin = mustRegistry(append([]*StageDef{decodeDef, grayscaleDef, blurDef, boxBlurDef, transposeDef, histogramDef, kernelDef, saveDef,
	resizeDef, cropDef, flipDef, rotateDef}, arrayDefs...)...)

func mustRegistry(defs ...*StageDef) *Registry {
	r, err := NewRegistry(defs...)
	if err != nil {
		panic("pipeline: builtin stages: " + err.Error())
	}
	return r
}

// Decode appends the decode stage with its default parameters (use Then for others).
func (p *Pipeline) Decode() *Pipeline { return p.Then(stageDecode, nil) }

// Grayscale appends the grayscale stage.
func (p *Pipeline) Grayscale() *Pipeline { return p.Then(stageGrayscale, nil) }

// Blur appends a Gaussian blur with the given sigma.
func (p *Pipeline) Blur(sigma float64) *Pipeline {
	return p.Then(stageBlur, Args{"sigma": sigma})
}

// BoxBlur appends a box blur with the given radius.
func (p *Pipeline) BoxBlur(radius int) *Pipeline {
	return p.Then(stageBoxBlur, Args{"radius": radius})
}

// Transpose appends the transpose stage.
func (p *Pipeline) Transpose() *Pipeline { return p.Then(stageTranspose, nil) }

// Histogram appends the histogram stage.
func (p *Pipeline) Histogram() *Pipeline { return p.Then(stageHistogram, nil) }

// Save appends the save stage with the given format ("png" or "jpeg").
func (p *Pipeline) Save(format string) *Pipeline {
	return p.Then(stageSave, Args{"format": format})
}
