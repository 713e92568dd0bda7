package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/imgpipe/imgpipe/stages"
)

// decode turns an input into pixels. owned tells whether the pixels belong to the run (and
// may be recycled) rather than to the caller.
// release gives back the input's share of the memory budget once the caller is done with it.
func (r *runner) decode(in Input, sc *scratch) (img *stages.Image, decoder string, owned bool, release func(), err error) {
	if in.Image != nil {
		if err := r.checkImage(in.Image); err != nil {
			return nil, "", false, nil, err
		}
		return in.Image, "", false, func() {}, nil
	}
	img, decoder, release, err = r.decodeInto(in, func(w, h, c int) (*stages.Image, error) { return sc.get(w, h, c), nil })
	return img, decoder, err == nil, release, err
}

// checkImage checks pixels given as an input against the decoder's pixel limit.
func (r *runner) checkImage(m *stages.Image) error {
	if err := m.Check(); err != nil {
		return err
	}
	if px := int64(m.W) * int64(m.H); px > r.plan.Decode.MaxPixels {
		return fmt.Errorf("image is %dx%d (%.1f MP), over the %.1f MP limit", m.W, m.H, float64(px)/1e6, float64(r.plan.Decode.MaxPixels)/1e6)
	}
	return nil
}

// decodeInto turns an input into pixels in memory from alloc, which is called once, after
// the pixels were decoded (a failing file takes no memory from it). Pixels given as the
// input are checked and copied. Before decoding it reserves the image's share of the memory
// budget (from the header's size); release gives it back, and is nil when err is not.
// decoder names the decoder, for the report ("" for pixels given as the input).
func (r *runner) decodeInto(in Input, alloc stages.Alloc) (img *stages.Image, decoder string, release func(), err error) {
	if in.Image != nil {
		if err := r.checkImage(in.Image); err != nil {
			return nil, "", nil, err
		}
		dst, err := alloc(in.Image.W, in.Image.H, in.Image.C)
		if err != nil {
			return nil, "", nil, err
		}
		for y := 0; y < dst.H; y++ {
			copy(dst.Row(y), in.Image.Row(y))
		}
		return dst, "", func() {}, nil
	}
	data := in.Data
	if data == nil {
		if in.Path == "" {
			return nil, "", nil, errors.New("input has no path, data or image")
		}
		if data, err = readFile(in.Path, r.plan.Decode); err != nil {
			return nil, "", nil, err
		}
	}
	var pixels int64
	if r.plan.Decode.Pixels != nil {
		if pixels, err = r.plan.Decode.Pixels(data); err != nil {
			return nil, "", nil, err
		}
	}
	if release, err = r.mem.acquire(r.ctx, pixels); err != nil {
		return nil, "", nil, err
	}
	img, decoder, err = r.plan.Decode.Decode(data, alloc)
	if err == nil {
		if cerr := img.Check(); cerr != nil {
			err = fmt.Errorf("decoder returned a bad image: %w", cerr)
		}
	}
	if err != nil {
		release()
		return nil, "", nil, err
	}
	return img, decoder, release, nil
}

// readFile reads a whole input file. Anything but a regular file (a FIFO would block), a
// file over the decoder's size limit, and a file whose first bytes the decoder refuses
// are refused before the file is read whole.
func readFile(path string, dec *Decoder) ([]byte, error) {
	limit := dec.MaxFileBytes()
	// O_NONBLOCK so that a FIFO (or a file swapped for one since the folder was walked) is
	// opened without waiting for a writer; the checks below then look at what was opened.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathless(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, pathless(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("file is %d bytes, over the %d-byte limit that max_pixels implies", fi.Size(), limit)
	}
	var buf bytes.Buffer
	if dec.Head != nil {
		buf.Grow(int(min(fi.Size(), HeadBytes)) + bytes.MinRead)
		if _, err := buf.ReadFrom(io.LimitReader(f, HeadBytes)); err != nil {
			return nil, pathless(err)
		}
		if err := dec.Head(buf.Bytes()); err != nil {
			return nil, err
		}
	}
	buf.Grow(int(fi.Size()) - buf.Len() + bytes.MinRead)
	// Read at most limit+1 bytes, in case the file grew since Stat.
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1-int64(buf.Len()))); err != nil {
		return nil, pathless(err)
	}
	if int64(buf.Len()) > limit {
		return nil, fmt.Errorf("file grew over the %d-byte limit that max_pixels implies", limit)
	}
	return buf.Bytes(), nil
}
