package pipeline

import (
	"context"
	"image"
	"io"
	"time"

	"github.com/imgpipe/imgpipe/stages"
)

// Input is one image to process. Exactly one of Path, Data and Image says where the image
// comes from; Previous and Err mark inputs that need no work.
type Input struct {
	// Name identifies the input in results and the report: a relative, slash-separated
	// path for folder inputs.
	Name string
	// Path is a file to read and decode.
	Path string
	// Data holds encoded bytes to decode.
	Data []byte
	// Open, when set, opens the encoded bytes in another store than the local file system
	// (an object in a bucket): the worker that decodes the input reads them, with the
	// same size limit as a file's. size is the object's size.
	Open func(ctx context.Context) (r io.ReadCloser, size int64, err error)
	// Image holds pixels that are already decoded; decode only checks its pixel limit.
	// ImageInput (stages.FromImage) makes one from an image.Image.
	Image *stages.Image
	// OutStem is the output's relative path without extension; the save stage adds its
	// format's. Empty means Name without its extension. Folder sources set it to apply
	// the name clash rule.
	OutStem string
	// Size and ModTime are the input file's size and modification time, when the source
	// knows them (Folder sets them from the walk); the report records them, and Resume
	// redoes an input whose file changed since.
	Size    int64
	ModTime time.Time
	// Previous, when set, is this input's line in an earlier report: it was done then and
	// is reported as skipped without any work (see Resume).
	Previous *ReportLine
	// Err, when set, means the source could not provide this input (an unreadable folder,
	// an output name clash); it is reported as the input's failure, as is.
	Err error
}

// ImageInput returns an input of pixels from the standard library (or any image.Image),
// converted by stages.FromImage: gray images stay gray (C = 1), all others become RGB, alpha
// dropped. The conversion is a copy, made now, so img may change afterwards. A result's
// image goes back with Result.Image.ToImage().
func ImageInput(name string, img image.Image) Input {
	return Input{Name: name, Image: stages.FromImage(img)}
}

// Source yields the inputs of a run, one at a time, in a deterministic order.
type Source interface {
	// Next returns the next input, or io.EOF after the last. Any other error is fatal
	// to the run; problems with a single input travel in Input.Err instead. Next is called
	// from one goroutine at a time.
	Next(ctx context.Context) (Input, error)
}

// Inputs returns a source that yields the given inputs in order.
func Inputs(in ...Input) Source { return &sliceSource{in: in} }

type sliceSource struct {
	in []Input
	i  int
}

func (s *sliceSource) Next(ctx context.Context) (Input, error) {
	if s.i >= len(s.in) {
		return Input{}, io.EOF
	}
	s.i++
	return s.in[s.i-1], nil
}

// FromChan returns a source that yields inputs received from ch until it is closed.
func FromChan(ch <-chan Input) Source { return chanSource(ch) }

type chanSource <-chan Input

func (c chanSource) Next(ctx context.Context) (Input, error) {
	select {
	case in, ok := <-c:
		if !ok {
			return Input{}, io.EOF
		}
		return in, nil
	case <-ctx.Done():
		return Input{}, ctx.Err()
	}
}
