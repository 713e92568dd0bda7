package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/imgpipe/imgpipe/stages"
)

// decode turns an input into pixels. owned tells whether the pixels belong to the run (and
// may be recycled) rather than to the caller.
// release gives back the input's share of the memory budget once the caller is done with it.
func (r *runner) decode(in Input, sc *scratch) (img *stages.Image, decoder Decoded, owned bool, release func(), err error) {
	if in.Image != nil {
		if err := r.checkImage(in.Image); err != nil {
			return nil, Decoded{}, false, nil, err
		}
		return in.Image, Decoded{}, false, func() {}, nil
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
// input are checked and copied. Before decoding it charges the memory budget (see load);
// release gives the charge back, and is nil when err is not. decoder says how the pixels
// were decoded, for the report (zero for pixels given as the input).
func (r *runner) decodeInto(in Input, alloc stages.Alloc) (img *stages.Image, decoder Decoded, release func(), err error) {
	if in.Image != nil {
		if err := r.checkImage(in.Image); err != nil {
			return nil, Decoded{}, nil, err
		}
		dst, err := alloc(in.Image.W, in.Image.H, in.Image.C)
		if err != nil {
			return nil, Decoded{}, nil, err
		}
		for y := 0; y < dst.H; y++ {
			copy(dst.Row(y), in.Image.Row(y))
		}
		return dst, Decoded{}, func() {}, nil
	}
	f, err := r.load(in)
	if err != nil {
		return nil, Decoded{}, nil, err
	}
	return r.decodeLoaded(f, alloc)
}

// loaded is an input's encoded bytes with their share of the memory budget held.
type loaded struct {
	data    []byte
	release func() // gives the charge back
}

// load returns the encoded bytes of an input that is not pixels, with the memory budget
// charged for decoding them (decodeNeed). Bytes given as the input (Data) are the
// caller's, already in memory: only their decoding is charged. A file is read by
// readInput, which charges the budget before it reads the file whole.
func (r *runner) load(in Input) (loaded, error) {
	if in.Data != nil {
		need, err := r.decodeNeed(in.Data, int64(len(in.Data)))
		if err != nil {
			return loaded{}, err
		}
		release, err := r.mem.acquire(r.ctx, need-int64(len(in.Data)))
		if err != nil {
			return loaded{}, err
		}
		return loaded{in.Data, release}, nil
	}
	var data []byte
	var release func()
	var err error
	t0 := time.Now()
	switch {
	case in.Open != nil:
		data, release, err = r.readOpened(in)
	case in.Path == "":
		return loaded{}, errors.New("input has no path, data or image")
	default:
		data, release, err = r.readInput(in.Path)
	}
	since(&r.phases.read, t0)
	if err != nil {
		return loaded{}, err
	}
	return loaded{data, release}, nil
}

// decodeLoaded decodes f into memory from alloc (see decodeInto). It takes over f's
// charge: it gives it back on failure, and otherwise returns it as release.
func (r *runner) decodeLoaded(f loaded, alloc stages.Alloc) (img *stages.Image, decoder Decoded, release func(), err error) {
	defer func() {
		if p := recover(); p != nil {
			f.release() // a decoder bug fails the input, not the budget
			panic(p)
		}
	}()
	t0 := time.Now()
	img, decoder, err = r.plan.Decode.Decode(f.data, alloc)
	since(&r.phases.decode, t0)
	if err == nil {
		if cerr := img.Check(); cerr != nil {
			err = fmt.Errorf("decoder returned a bad image: %w", cerr)
		}
	}
	if err != nil {
		f.release()
		return nil, Decoded{}, nil, err
	}
	return img, decoder, f.release, nil
}

// decodeNeed is the memory budget's charge for decoding a file of size bytes whose first
// bytes are head: the file's bytes, the decoder's working set for its format and size, and
// the chain's own buffers (ChainBytesPerPixel). A header the head does not hold (it lies
// further on) gives -1: the whole budget, the safe side. A decoder without Cost (one of
// the Go API's) is charged the file's bytes only.
func (r *runner) decodeNeed(head []byte, size int64) (int64, error) {
	dec := r.plan.Decode
	if dec.Cost == nil {
		return size, nil
	}
	c, err := dec.Cost(head, size)
	switch {
	case err == nil:
		return size + c.WorkBytes + int64(c.W)*int64(c.H)*ChainBytesPerPixel, nil
	case int64(len(head)) == size, errors.Is(err, stages.ErrTooLarge), errors.Is(err, stages.ErrFileTooLarge):
		return 0, err // the whole file was seen, or what was is refused anyway
	}
	return -1, nil
}

// readInput reads a whole input file after charging the memory budget for it, and returns
// the function that gives the charge back. Anything but a regular file (a FIFO would
// block), a file over the decoder's size limit, a file whose first bytes the decoder
// refuses and a file far larger than its header's pixels could need are refused after
// reading at most HeadBytes, before the budget is charged: the rest of the file is read
// only once its bytes and its decoding fit in the budget.
func (r *runner) readInput(path string) (data []byte, release func(), err error) {
	// O_NONBLOCK so that a FIFO (or a file swapped for one since the folder was walked) is
	// opened without waiting for a writer; the checks below then look at what was opened.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, pathless(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, pathless(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, errors.New("not a regular file")
	}
	return r.readLimited(f, fi.Size())
}

// readOpened reads the whole of an input that Open gives (an object in a bucket) as
// readInput reads a file: the size limit, the decoder's head check and the memory budget's
// charge all come before the object is read whole.
func (r *runner) readOpened(in Input) (data []byte, release func(), err error) {
	rc, size, err := in.Open(r.ctx)
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	return r.readLimited(rc, size)
}

// readLimited reads a whole input of the given size from f (see readInput): it reads at
// most HeadBytes for the checks, charges the memory budget, then reads the rest.
func (r *runner) readLimited(f io.Reader, size int64) (data []byte, release func(), err error) {
	dec := r.plan.Decode
	limit := dec.MaxFileBytes()
	if size > limit {
		return nil, nil, fmt.Errorf("file is %d bytes, over the %d-byte limit that max_pixels implies", size, limit)
	}
	head := make([]byte, min(size, HeadBytes))
	if _, err := io.ReadFull(f, head); err != nil {
		return nil, nil, pathless(err)
	}
	if dec.Head != nil {
		if err := dec.Head(head); err != nil {
			return nil, nil, err
		}
	}
	need, err := r.decodeNeed(head, size)
	if err != nil {
		return nil, nil, err
	}
	if release, err = r.mem.acquire(r.ctx, need); err != nil {
		return nil, nil, err
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	buf.Write(head)
	// Read at most limit+1 bytes, in case the file grew since Stat (or the store's size was wrong).
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1-int64(buf.Len()))); err != nil {
		release()
		return nil, nil, pathless(err)
	}
	if int64(buf.Len()) > limit {
		release()
		return nil, nil, fmt.Errorf("file grew over the %d-byte limit that max_pixels implies", limit)
	}
	return buf.Bytes(), release, nil
}
