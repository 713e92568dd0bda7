package pipeline

import (
	"io"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/libwebp"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// The save stage: the sink that encodes each result into the output folder (stages.Encode;
// codec.go picks a device encoder on a GPU run).

const stageSave = "save"

func init() { builtin(saveDef) }

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
			Help: "JPEG and lossy WebP quality", AppliesIf: []ParamIf{{"format", []string{"jpeg", "webp"}}, {"lossless", []string{"false"}}}},
		{Name: "lossless", Kind: Bool, Default: false,
			Help: "WebP: lossless instead of quality", AppliesIf: []ParamIf{{"format", []string{"webp"}}}},
		{Name: "compression", Kind: Enum, Default: "fast", Values: pngCompressions,
			Help:      "PNG: fast (imgpipe's own Huffman-only encoding, same bytes on CPU and GPU), 1..9 zlib level, 0 stores; TIFF: 0 stores, else Deflate",
			AppliesIf: []ParamIf{{"format", []string{"png", "tiff"}}}},
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
