package main

import (
	"bufio"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// chunkWriter writes each Write as one PNG chunk of its type.
type chunkWriter struct {
	w   io.Writer
	typ string
	err error
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(len(p)))
	b = append(append(b, c.typ...), p...)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[4:]))
	_, c.err = c.w.Write(b)
	return len(p), c.err
}

// writeNoisePNG writes a w×h 16-bit RGBA PNG of noise, stored uncompressed (8 bytes a
// pixel in the file), row by row, so that this process never holds it (its peak RSS is
// what a child started from it begins with).
func writeNoisePNG(t *testing.T, path string, w, h int) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	bw.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(w)), uint32(h))
	(&chunkWriter{w: bw, typ: "IHDR"}).Write(append(ihdr, 16, 6, 0, 0, 0))
	idat := &chunkWriter{w: bw, typ: "IDAT"}
	chunks := bufio.NewWriterSize(idat, 1<<20) // IDAT chunks of 1 MiB
	zw, _ := zlib.NewWriterLevel(chunks, zlib.NoCompression)
	rng := rand.New(rand.NewSource(1))
	row := make([]byte, 1+8*w) // filter type 0, then the samples
	for y := 0; y < h; y++ {
		rng.Read(row[1:])
		zw.Write(row)
	}
	zw.Close()
	chunks.Flush()
	if err := idat.err; err != nil {
		t.Fatal(err)
	}
	(&chunkWriter{w: bw, typ: "IEND"}).Write(nil)
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
}

// rssEnv makes the test binary rssChild: set, it runs os.Args[1:] and prints that
// command's peak RSS.
const rssEnv = "IMGPIPE_TEST_RSS_CHILD"

// rssChild runs the command os.Args[1:] names and prints its peak RSS in bytes. A child
// started by os/exec (vfork) begins with its parent's high-water mark, which in a test
// process full of other tests' data hides the child's own: started from this small
// process, the command's mark is its own.
func rssChild() int {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		fmt.Fprintln(os.Stderr, "no rusage here")
		return 1
	}
	fmt.Println(ru.Maxrss << 10) // KiB on Linux
	return 0
}

// peakRSS runs imgpipe on the folder in under a 64 MiB budget and returns its peak RSS.
func peakRSS(t *testing.T, in string) int64 {
	cmd := exec.Command(os.Args[0], binaryPath, "run", "-i", in, "-o", filepath.Join(t.TempDir(), "out"), "-p", "decode | histogram",
		"--device", "cpu", "--max-memory-mb", "64", "-q")
	cmd.Env = append(os.Environ(), rssEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A PNG as large as its pixels, decoded under a 64 MiB budget, is streamed, not held
// whole: the child's peak RSS beyond that of a run on a tiny PNG stays under the file's
// two images (the decoder's 16-bit one and the RGB result) + slack; reading the 32 MB
// file whole would add its bytes (measured here: 36 MiB streamed, 67 read whole).
func TestStreamedPNGBoundedRSS(t *testing.T) {
	needBinary(t)
	const w, h = 2000, 2000
	tiny, big := t.TempDir(), t.TempDir()
	writeNoisePNG(t, filepath.Join(tiny, "tiny.png"), 2, 2)
	writeNoisePNG(t, filepath.Join(big, "big.png"), w, h)
	base, peak := peakRSS(t, tiny), peakRSS(t, big)
	const slack = 12 << 20
	t.Logf("base %d MiB, peak %d MiB", base>>20, peak>>20)
	if images := int64(w * h * (8 + 3)); peak-base > images+slack {
		t.Errorf("peak RSS %d MiB beyond a tiny run's %d MiB; the images take %d MiB (+%d slack): the file was held whole",
			(peak-base)>>20, base>>20, images>>20, slack>>20)
	}
}
