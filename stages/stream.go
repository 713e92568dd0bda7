package stages

import (
	"bufio"
	"fmt"
	"io"
)

// StreamBufferBytes is the read buffer a streamed decode holds beyond its working set
// and the file's head (see DecodeStream): large enough that Go's decoders, which read a
// few bytes at a time, make few reads of the file.
const StreamBufferBytes = 64 << 10

// Streamed reports whether DecodeStream decodes files of format (a Sniff name) from the
// file instead of from its whole bytes. Go's PNG, GIF, BMP and WebP decoders read from
// an io.Reader and TIFF's from an io.ReaderAt, holding only their working set. JPEG is
// not streamed: its scan limits (checkJPEGWork) look at the whole file before decoding,
// libjpeg-turbo decodes from memory, and the GPU takes the whole file.
func Streamed(format string) bool {
	switch format {
	case "png", "gif", "bmp", "tiff", "webp":
		return true
	}
	return false
}

// DecodeStream decodes a file of size bytes, whose first bytes are head (as read from it,
// at most the whole file), reading the rest from file at their offsets, without holding
// the file whole. The header is read from head and checked as Decode checks it (pixel
// limit, size against the pixels) before any pixel is allocated, so head must hold it: an
// error then may only mean that it lies further on (the caller reads the file whole and
// calls Decode). The decoder sees head's bytes, not the file's, for the first len(head)
// bytes, so it decodes the header that was checked even if the file changed since, and
// never reads past size. Only formats that Streamed names are accepted. An error from
// file (a cancelled run's, say) is returned as it is, wrapped at most. Pixels are as
// Decode's (Go's decoders; no JPEG).
func DecodeStream(head []byte, file io.ReaderAt, size int64, opt DecodeOptions, alloc Alloc) (*Image, error) {
	if int64(len(head)) > size {
		return nil, fmt.Errorf("head of %d bytes is longer than the %d-byte file", len(head), size)
	}
	hd, f, canvas, err := readHeaderSized(head, size, opt)
	if err != nil {
		return nil, err
	}
	if !Streamed(f.name) {
		return nil, fmt.Errorf("%s is decoded from the whole file, not streamed", f.name)
	}
	src := io.NewSectionReader(replayed{head, file}, 0, size)
	var r io.Reader = src // TIFF reads at offsets (io.ReaderAt), from the file itself
	if f.name != "tiff" {
		r = bufio.NewReaderSize(src, StreamBufferBytes)
	}
	return decodeGo(r, f, hd, canvas, alloc)
}

// replayed is a file whose first len(head) bytes are served from head, where they were
// read and checked, and the rest from the file.
type replayed struct {
	head []byte
	file io.ReaderAt
}

// ReadAt reads len(p) bytes at off: from the head, then from the file.
func (r replayed) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	if off < int64(len(r.head)) {
		n = copy(p, r.head[off:])
		if n == len(p) {
			return n, nil
		}
	}
	m, err := r.file.ReadAt(p[n:], off+int64(n))
	return n + m, err
}
