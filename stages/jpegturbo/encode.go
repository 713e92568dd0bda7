package jpegturbo

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"unsafe"
)

// TurboJPEG's chroma subsampling and flags for compression (turbojpeg.h).
const (
	tjsamp420          = 2    // TJSAMP_420
	tjsampGray         = 3    // TJSAMP_GRAY
	tjflagNoRealloc    = 1024 // TJFLAG_NOREALLOC: write into the buffer given, sized by tjBufSize
	tjflagAccurateDCT  = 4096 // TJFLAG_ACCURATEDCT: the islow forward DCT
	maxEncodeDimension = 65535
)

// compressor is one TurboJPEG compression handle; idle ones wait in compressors (a
// compression handle is independent of the one before, so any idle one serves).
type compressor struct {
	h       uintptr
	cleanup runtime.Cleanup // destroys h once the pool has dropped c
}

var compressors sync.Pool

// outputs recycles the buffers files are compressed into (*[]byte): tjBufSize's worst case,
// 3 bytes a pixel in 4:2:0, which allocated and zeroed afresh for each file would cost more
// than a thumbnail's encoding.
var outputs sync.Pool

// Encode compresses a w×h image into a baseline JPEG file at quality (1..100) and writes it
// to dst: row y is the w*bytes-per-pixel bytes from pix[y*stride], in format f (PixelRGB,
// encoded in 4:2:0, or PixelGray). Sizes and the buffer are checked before the library is
// called.
func Encode(dst io.Writer, pix []byte, w, h, stride int, f PixelFormat, quality int) error {
	file, release, err := compress(pix, w, h, stride, f, quality)
	if err != nil {
		return err
	}
	defer release()
	_, err = dst.Write(file)
	return err
}

// compress is Encode into a pooled buffer, which release gives back.
func compress(pix []byte, w, h, stride int, f PixelFormat, quality int) (file []byte, release func(), err error) {
	sub := tjsamp420
	switch f {
	case PixelRGB:
	case PixelGray:
		sub = tjsampGray
	default:
		return nil, nil, fmt.Errorf("encoding pixel format %d is not supported", int(f))
	}
	bpp := f.bytesPerPixel()
	switch {
	case quality < 1 || quality > 100:
		return nil, nil, fmt.Errorf("quality %d is not in 1..100", quality)
	case w <= 0 || h <= 0 || w > maxEncodeDimension || h > maxEncodeDimension:
		return nil, nil, fmt.Errorf("image is %dx%d, over JPEG's 65535 limit or empty", w, h)
	}
	if err := checkRows(pix, w, h, stride, bpp); err != nil {
		return nil, nil, err
	}
	l, err := load()
	if err != nil {
		return nil, nil, err
	}
	runtime.LockOSThread() // the error message of a failed call is per thread
	defer runtime.UnlockOSThread()
	c, _ := compressors.Get().(*compressor)
	if c == nil {
		hd := l.call(l.initCompress)
		if hd == 0 {
			return nil, nil, fmt.Errorf("tjInitCompress: %s", l.errorString(0))
		}
		c = &compressor{h: hd}
		c.cleanup = runtime.AddCleanup(c, func(h uintptr) { l.call(l.destroy, h) }, hd)
	}
	bp, _ := outputs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	if n := int(l.call(l.bufSize, uintptr(w), uintptr(h), uintptr(sub))); cap(*bp) < n {
		*bp = make([]byte, n)
	}
	out := (*bp)[:cap(*bp)]
	release = func() { outputs.Put(bp) }
	dst := unsafe.Pointer(unsafe.SliceData(out))
	size := uint64(len(out)) // unsigned long
	r := l.call(l.compress2, c.h, uintptr(unsafe.Pointer(unsafe.SliceData(pix))), uintptr(w), uintptr(stride), uintptr(h), uintptr(f),
		uintptr(unsafe.Pointer(&dst)), uintptr(unsafe.Pointer(&size)), uintptr(sub), uintptr(quality), tjflagNoRealloc|tjflagAccurateDCT)
	if int32(uint32(r)) != 0 {
		err := &Error{Msg: l.errorString(c.h)}
		c.cleanup.Stop() // a failed handle may be left mid-stream: destroy it
		l.call(l.destroy, c.h)
		release()
		return nil, nil, err
	}
	compressors.Put(c)
	if size > uint64(len(out)) {
		release()
		return nil, nil, fmt.Errorf("tjCompress2 wrote %d bytes into a buffer of %d", size, len(out))
	}
	return out[:size], release, nil
}
