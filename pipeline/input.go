package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/imgpipe/imgpipe/fsguard"
	"github.com/imgpipe/imgpipe/stages"
)

// decode turns an input into pixels. owned tells whether the pixels belong to the run (and
// may be recycled) rather than to the caller.
// release gives back the input's share of the memory budget once the caller is done with it.
func (r *Runner) decode(in Input, sc *scratch) (img *stages.Image, decoder Decoded, owned bool, release func(), err error) {
	if in.Image != nil {
		if err := r.checkImage(in.Image); err != nil {
			return nil, Decoded{}, false, nil, err
		}
		return in.Image, Decoded{}, false, func() {}, nil
	}
	img, decoder, release, err = r.decodeInto(in, func(w, h, c int) (*stages.Image, error) { return sc.get(w, h, c), nil })
	return img, decoder, err == nil, release, err
}

// checkImage checks pixels given as an input against the decoder's pixel limit and the
// stages' limits on their shapes (Plan.Check).
func (r *Runner) checkImage(m *stages.Image) error {
	if err := m.Check(); err != nil {
		return err
	}
	if px := int64(m.W) * int64(m.H); px > r.plan.Decode.MaxPixels {
		return fmt.Errorf("image is %dx%d (%.1f MP), over the %.1f MP limit", m.W, m.H, float64(px)/1e6, float64(r.plan.Decode.MaxPixels)/1e6)
	}
	_, err := r.plan.Check(m.Shape())
	return err
}

// decodeInto turns an input into pixels in memory from alloc, which is called once, after
// the pixels were decoded (a failing file takes no memory from it). Pixels given as the
// input are checked and copied. Before decoding it charges the memory budget (see load);
// release gives the charge back, and is nil when err is not. decoder says how the pixels
// were decoded, for the report (zero for pixels given as the input).
func (r *Runner) decodeInto(in Input, alloc stages.Alloc) (img *stages.Image, decoder Decoded, release func(), err error) {
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

// Loaded is an input's encoded bytes, whole or to be streamed from its file, with their
// share of the memory budget held.
type Loaded struct {
	// data is the whole file; nil for a streamed one.
	data []byte
	// head is the file's first bytes (all of data when data is set), which the header
	// checks have seen; a streamed decode replays them.
	head []byte
	// stream, for a streamed file, reads the file's bytes at their offsets (the run's
	// context stops it, see ctxReaderAt); size is the file's size.
	stream *ctxReaderAt
	size   int64
	// close closes the streamed file; nil when there is none.
	close   func()
	release func() // gives the charge back
}

// Drop gives back what f holds, for an input that will not be decoded.
func (f Loaded) Drop() {
	if f.close != nil {
		f.close()
	}
	f.release()
}

// load returns the encoded bytes of an input that is not pixels, with the memory budget
// charged for decoding them (decodeNeed). Bytes given as the input (Data) are the
// caller's, already in memory: only their decoding is charged. A file is read by
// readInput, which charges the budget before it reads the file whole or, for a format
// the decoder streams, leaves it open to be decoded from.
func (r *Runner) load(in Input) (Loaded, error) {
	if in.Data != nil {
		need, _, err := r.decodeNeed(in.Data, int64(len(in.Data)), false)
		if err != nil {
			return Loaded{}, err
		}
		release, err := r.mem.acquire(r.ctx, need-int64(len(in.Data)))
		if err != nil {
			return Loaded{}, err
		}
		return Loaded{data: in.Data, head: in.Data, size: int64(len(in.Data)), release: release}, nil
	}
	var f Loaded
	var err error
	t0 := time.Now()
	switch {
	case in.Open != nil:
		f, err = r.readOpened(in)
	case in.Path == "":
		return Loaded{}, errors.New("input has no path, data or image")
	default:
		f, err = r.readInput(in.Path)
	}
	since(&r.phases.read, t0)
	return f, err
}

// decodeLoaded decodes f into memory from alloc (see decodeInto). It takes over f's
// charge: it gives it back on failure, and otherwise returns it as release; a streamed
// file is closed either way. A streamed decode that the run's end stopped returns the
// context's error, so that the input is dropped (redone by --resume), not failed.
func (r *Runner) decodeLoaded(f Loaded, alloc stages.Alloc) (img *stages.Image, decoder Decoded, release func(), err error) {
	if f.close != nil {
		defer f.close()
	}
	defer func() {
		if p := recover(); p != nil {
			f.release() // a decoder bug fails the input, not the budget
			panic(p)
		}
	}()
	t0 := time.Now()
	if f.stream != nil {
		img, decoder, err = r.plan.Decode.DecodeStream(f.head, f.stream, f.size, alloc)
		if err != nil && f.stream.stopped != nil {
			err = f.stream.stopped // whatever the decoder made of it
		}
	} else {
		img, decoder, err = r.plan.Decode.Decode(f.data, alloc)
	}
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
// bytes are head: the decoder's working set for its format and size, the chain's own
// buffers (ChainBytesPerPixel for each pixel of the largest image along the chain, which
// a resize may make larger than the decoded one), and the file's bytes, or, when the file
// is decoded from a stream (canStream: the caller can read the file at offsets; the
// decoder streams the format and head holds the header), only head and the stream's
// buffer (stages.StreamBufferBytes). A header the head does not hold (it lies further on) gives
// -1: the whole budget, the safe side. A decoder without Cost (one of the Go API's) is
// charged the file's bytes only. An image that a stage refuses for its shape (Plan.Check)
// is an error here, before it is read whole.
func (r *Runner) decodeNeed(head []byte, size int64, canStream bool) (need int64, streamed bool, err error) {
	dec := r.plan.Decode
	if dec.Cost == nil {
		return size, false, nil
	}
	c, err := dec.Cost(head, size)
	switch {
	case err == nil:
		most, err := r.plan.Check(stages.Shape{W: c.W, H: c.H, C: 3})
		if err != nil {
			return 0, false, err
		}
		need = c.WorkBytes + most*ChainBytesPerPixel
		if canStream && dec.DecodeStream != nil && stages.Streamed(c.Format) {
			return need + int64(len(head)) + stages.StreamBufferBytes, true, nil
		}
		return size + need, false, nil
	case int64(len(head)) == size, errors.Is(err, stages.ErrTooLarge), errors.Is(err, stages.ErrFileTooLarge):
		return 0, false, err // the whole file was seen, or what was is refused anyway
	}
	return -1, false, nil
}

// readInput reads an input file after charging the memory budget for it (see load).
// Anything but a regular file (a FIFO would block), a file over the decoder's size limit,
// a file whose first bytes the decoder refuses and a file far larger than its header's
// pixels could need are refused after reading at most HeadBytes, before the budget is
// charged: the rest of the file is read only once its decoding (and, unless it is
// streamed, its bytes) fit in the budget.
func (r *Runner) readInput(path string) (Loaded, error) {
	// A FIFO (or a file swapped for one since the folder was walked) is refused without
	// waiting for a writer; the checks below then look at what was opened.
	f, fi, err := openInput(path)
	if err != nil {
		return Loaded{}, err
	}
	return r.readLimited(f, fi.Size())
}

// readOpened reads an input that Open gives (an object in a bucket) as readInput reads a
// file: the size limit, the decoder's head check and the memory budget's charge all come
// before the object is read; it is streamed if the reader can read at offsets.
func (r *Runner) readOpened(in Input) (Loaded, error) {
	rc, size, err := in.Open(r.ctx)
	if err != nil {
		return Loaded{}, err
	}
	return r.readLimited(rc, size)
}

// readLimited reads an input of the given size from f (see readInput), and closes f
// unless the result streams from it: it reads at most HeadBytes for the checks, charges
// the memory budget, then reads the rest, or, for a file that f can read at offsets
// (io.ReaderAt: an *os.File) and the decoder streams (decodeNeed), leaves it to the
// decoder to read.
func (r *Runner) readLimited(f io.ReadCloser, size int64) (l Loaded, err error) {
	defer func() {
		if l.close == nil {
			f.Close()
		}
	}()
	data, head, release, err := r.readHead(f, size)
	if err != nil || data != nil {
		return Loaded{data: data, head: head, size: size, release: release}, err
	}
	return Loaded{head: head, stream: &ctxReaderAt{ctx: r.ctx, r: f.(io.ReaderAt)}, size: size,
		close: func() { f.Close() }, release: release}, nil
}

// readHead reads the head of an input of the given size from f and charges the memory
// budget for it (see readLimited); data is the whole input, or nil when it is to be
// streamed from f.
func (r *Runner) readHead(f io.Reader, size int64) (data, head []byte, release func(), err error) {
	dec := r.plan.Decode
	limit := dec.MaxFileBytes()
	if size > limit {
		return nil, nil, nil, fmt.Errorf("file is %d bytes, over the %d-byte limit that max_pixels implies", size, limit)
	}
	head = make([]byte, min(size, HeadBytes))
	if _, err := io.ReadFull(f, head); err != nil {
		return nil, nil, nil, pathless(err)
	}
	if dec.Head != nil {
		if err := dec.Head(head); err != nil {
			return nil, nil, nil, err
		}
	}
	_, canStream := f.(io.ReaderAt)
	need, streamed, err := r.decodeNeed(head, size, canStream && int64(len(head)) < size)
	if err != nil {
		return nil, nil, nil, err
	}
	if release, err = r.mem.acquire(r.ctx, need); err != nil || streamed {
		return nil, head, release, err
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	buf.Write(head)
	// Read at most limit+1 bytes, in case the file grew since Stat (or the store's size was wrong).
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1-int64(buf.Len()))); err != nil {
		release()
		return nil, nil, nil, pathless(err)
	}
	if int64(buf.Len()) > limit {
		release()
		return nil, nil, nil, fmt.Errorf("file grew over the %d-byte limit that max_pixels implies", limit)
	}
	return buf.Bytes(), head, release, nil
}

// openInput opens an input file as fsguard.Open does (links followed: a listed or walked
// link to a regular file is the user's), with the error as an input's reason.
func openInput(path string) (*os.File, fs.FileInfo, error) {
	f, fi, err := fsguard.Open(path, fsguard.FollowLinks)
	if errors.Is(err, fsguard.ErrNotRegular) {
		return nil, nil, errors.New("not a regular file")
	}
	if err != nil {
		return nil, nil, pathless(err)
	}
	return f, fi, nil
}

// ctxReaderAt reads a streamed file until the run's context ends, so that a long decode
// (a big PNG) stops at its next read instead of running to the end after an interrupt.
// It is used by one decoding goroutine at a time.
type ctxReaderAt struct {
	ctx context.Context
	r   io.ReaderAt
	// stopped is the context's error once a read returned it: the decoder may wrap it
	// or turn it into a format error, and decodeLoaded reports it as it was.
	stopped error
}

// ReadAt reads from the file, or returns the context's error once it has ended (also
// when it ended during the read: a read that blocked until then is not used).
func (c *ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		c.stopped = err
		return 0, err
	}
	n, err := c.r.ReadAt(p, off)
	if cerr := c.ctx.Err(); cerr != nil {
		c.stopped = cerr
		return 0, cerr
	}
	return n, err
}
