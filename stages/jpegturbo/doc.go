// Package jpegturbo decodes JPEG files with libjpeg-turbo's TurboJPEG API,
// loaded at run time.
//
// libturbojpeg.so.0 (Debian and Ubuntu package libturbojpeg0) is opened with
// purego on first use, so the package builds with CGO_ENABLED=0 and works on
// machines without the library: there, [Available] and every call return an
// error wrapping [ErrUnavailable] that says why.
//
// It is the optional fast JPEG backend of package stages (DecodeOptions.JPEG
// = stages.JPEGTurbo); stages keeps Go's image/jpeg as the default because
// only that gives the same bits on every machine. libjpeg-turbo is decoded
// with flags that keep its defaults (the accurate integer IDCT and "fancy"
// chroma upsampling), so its pixels differ slightly from Go's: Go uses
// another IDCT and replicates chroma samples.
//
// # Errors and warnings
//
// libjpeg-turbo tells fatal errors from warnings (data it could decode only
// by guessing). A fatal error is an *[Error] with libjpeg's message, e.g.
// "Not a JPEG file: starts with 0x89 0x50". Warnings are handled so that a
// file fails here when it fails with Go's decoder:
//   - "Premature end of JPEG file" (a truncated file, which libjpeg pads
//     with grey) is an error that matches io.ErrUnexpectedEOF, the error Go's
//     decoder gives;
//   - corrupt entropy-coded data ("Corrupt JPEG data: bad Huffman code",
//     "premature end of data segment", a missing restart marker, an
//     inconsistent progression) is an error with libjpeg's message;
//   - warnings about metadata or stray bytes that libjpeg skips without
//     touching the pixels (extraneous bytes before a marker, an unknown JFIF
//     revision or Adobe transform code, a bad ICC marker) are not errors.
//
// libjpeg reports only the first warning of a file, so a file whose first
// warning is harmless and a later one is not decodes without error.
//
// Progressive files with more than 500 scans are refused
// (TJFLAG_LIMITSCANS): such files exist only to make a decoder spend
// quadratic time, and the flag does not change any pixel.
//
// # Threading
//
// A TurboJPEG handle may be used by one thread at a time, and libjpeg-turbo
// keeps its last error message per OS thread. Each call therefore makes a
// handle of its own and runs under runtime.LockOSThread; the functions are
// safe for concurrent use. A decode's handle serves that one call: libjpeg
// keeps a handle's tables from file to file, and a file that lacks some (a
// Motion-JPEG frame has no Huffman tables) would otherwise decode by what the
// handle read before.
package jpegturbo
