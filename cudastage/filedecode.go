package cudastage

import (
	"errors"
	"fmt"
	"sync"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/nvjpeg"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

var (
	_ sched.FileDecoder   = (*Device)(nil)
	_ sched.DecoderInfo   = (*Device)(nil)
	_ sched.DecoderWarmer = (*Device)(nil)
)

// jpegCodec is a Device's nvJPEG side, opened on first use (a chain that
// decodes no file never loads nvJPEG).
type jpegCodec struct {
	once sync.Once
	err  error // why nvJPEG cannot be used; nil when it can

	hw             *nvjpeg.Handle // nil without hardware engines
	hwErr          error          // why there is no hw handle
	engines, cores int
	capacity       int // files per batched call
	cuda           *nvjpeg.Handle

	// parsers is DecodeRoute's free list: a channel, so that taking and
	// returning a parser never contends on mu with the streams' decoders.
	parsers chan *routeParser

	mu       sync.Mutex
	route    *nvjpeg.ImageDecoder // answers Supported for DecodeRoute, under mu
	streams  map[sched.Stream]*streamCodec
	idle     []*streamCodec // decoders of destroyed streams, kept for the next ones
	allParse []*routeParser // every parser kept, for close
}

// maxRouteParsers bounds the parsers DecodeRoute makes: one per concurrent
// decode worker; callers beyond it wait for a free one.
const maxRouteParsers = 256

// routeParser parses files for DecodeRoute; one per concurrent caller.
type routeParser struct{ hw, cuda *nvjpeg.Stream }

// streamCodec is what Decode uses on one CUDA stream (nvJPEG states are not
// shareable between streams in flight). When its stream is destroyed it is
// kept idle for the next stream made, with its states and buffers: setting
// them up costs hundreds of milliseconds per stream, which runs one after
// another on a device (a benchmark's repeats, a queue worker's tasks) would
// otherwise pay every time.
type streamCodec struct {
	c          *jpegCodec
	batch      *nvjpeg.BatchDecoder // nil without hardware engines
	single     *nvjpeg.ImageDecoder // made on first use: most runs send every file to the engines
	js         *nvjpeg.Stream       // the size check before decoding
	scratch    cu.DevicePtr
	scratchCap int
}

// jpeg opens nvJPEG on first use. Its error says why there is none.
func (d *Device) jpeg() (*jpegCodec, error) {
	c := &d.codec
	c.once.Do(func() {
		c.err = c.open(d.g)
		if c.err != nil {
			c.err = fmt.Errorf("nvJPEG cannot be used: %w", c.err)
		}
	})
	return c, c.err
}

// open loads nvJPEG and creates the handles. A missing hardware backend is not an error:
// files then go to the CUDA decoder. The hardware handle is made on a second bound thread
// while the CUDA one is made: one after the other, they and the engines' query delayed
// the start of every GPU run (bench/results/2026-12-07-code-comments.md#cudastage).
func (c *jpegCodec) open(g *GPU) error {
	if err := nvjpeg.Load(); err != nil {
		return err
	}
	hwDone := make(chan struct{})
	go func() {
		defer close(hwDone)
		release, err := g.Bind()
		if err != nil {
			c.hwErr = err
			return
		}
		defer release()
		c.hwErr = c.openHardware()
	}()
	err := g.Do(c.openCUDA)
	<-hwDone
	if err != nil && c.hw != nil {
		err = errors.Join(err, g.Do(c.hw.Destroy))
		c.hw = nil
	}
	return err
}

// openCUDA creates the CUDA decoder's handle and DecodeRoute's decoder.
func (c *jpegCodec) openCUDA() (err error) {
	if c.cuda, err = nvjpeg.NewHandle(nvjpeg.BackendGPUHybrid); err != nil {
		return err
	}
	if c.route, err = c.cuda.NewImageDecoder(nvjpeg.BackendGPUHybrid); err != nil {
		err = errors.Join(err, c.cuda.Destroy())
		c.cuda = nil
		return err
	}
	c.mu.Lock()
	c.streams = map[sched.Stream]*streamCodec{}
	c.mu.Unlock()
	c.parsers = make(chan *routeParser, maxRouteParsers)
	return nil
}

// openHardware creates the hardware handle and reads the engines' size, or says why
// there is none.
func (c *jpegCodec) openHardware() error {
	hw, err := nvjpeg.NewHandle(nvjpeg.BackendHardware)
	if err != nil {
		return err
	}
	engines, cores, err := hw.HardwareInfo()
	if err != nil || engines == 0 {
		err = errors.Join(err, hw.Destroy())
		if err == nil {
			err = errors.New("nvJPEG reports 0 hardware decode engines")
		}
		return err
	}
	c.hw, c.engines, c.cores, c.capacity = hw, engines, cores, nvjpeg.BatchCapacity(engines, cores)
	return nil
}

// DecoderAvailable implements sched.DecoderInfo: why nvJPEG cannot decode on
// this device (library missing, handle creation failed), or nil when it can,
// for `backend=nvjpeg` validation. Without nvJPEG, DecodeRoute answers "" for
// every file.
func (d *Device) DecoderAvailable() error {
	_, err := d.jpeg()
	return err
}

// DecoderEngines implements sched.DecoderInfo: nvJPEG's hardware decode
// engines (0 without them, or without nvJPEG).
func (d *Device) DecoderEngines() int {
	c, err := d.jpeg()
	if err != nil {
		return 0
	}
	return c.engines
}

// DecoderBatch implements sched.DecoderInfo: the files per batched call
// (nvjpeg.BatchCapacity), 0 without engines or without nvJPEG.
func (d *Device) DecoderBatch() int {
	c, err := d.jpeg()
	if err != nil {
		return 0
	}
	return c.capacity
}

// WarmDecoder implements sched.DecoderWarmer: it loads nvJPEG, makes stream
// s's decoder states and initialises its batched decoder for full batched
// calls (batch files, at most the engines' call size), the setup that the
// first decode would otherwise pay (hundreds of milliseconds). Without
// nvJPEG it does nothing: Decode then fails each file with the reason.
func (d *Device) WarmDecoder(s sched.Stream, batch int) error {
	c, err := d.jpeg()
	if err != nil {
		return nil
	}
	return d.g.Do(func() error {
		sc, err := c.forStream(s)
		if err != nil || sc.batch == nil {
			return err
		}
		return sc.batch.Initialize(min(batch, c.capacity))
	})
}

// DecodeRoute implements sched.FileDecoder: sched.RouteHW when nvJPEG parses the
// file and nvjpegDecodeBatchedSupported accepts it for the hardware engines,
// else sched.RouteCUDA when the CUDA decoder takes it, else "" (not a JPEG,
// corrupt headers, CMYK, arithmetic-coded or lossless, no nvJPEG: the CPU
// decodes it).
//
// Decode workers call it for every file, concurrently: the common case (the
// hardware engines take the file) parses the header once, on the calling
// thread, with a parser from a channel free list, and takes no lock. Parsing
// and nvjpegDecodeBatchedSupported work on host memory only (nvJPEG's
// parser API takes no CUDA stream and touches no device memory), so they
// need no context bound (g.Do); creating a parser and asking the CUDA
// decoder, which may hold device state, still bind it.
func (d *Device) DecodeRoute(data []byte) string {
	// Checked before nvJPEG is opened, which is slow (see
	// bench/results/2026-12-07-code-comments.md#cudastage): the other formats,
	// JPEGs other than Huffman-coded sequential and progressive ones, which nvJPEG does not
	// decode, and those of other than 1 (gray) or 3 (YCbCr) components: CMYK and YCCK go to
	// the CPU, whose Adobe-aware conversion nvJPEG's does not match (0: no frame header).
	if len(data) < 2 || data[0] != 0xFF || data[1] != 0xD8 || stages.JPEGCoding(data) != "" {
		return ""
	}
	if n := stages.JPEGComponents(data); n != 1 && n != 3 {
		return ""
	}
	c, err := d.jpeg()
	if err != nil {
		return ""
	}
	p, err := d.parser(c)
	if err != nil {
		return ""
	}
	defer c.putParser(p)
	route, decided := c.hwRoute(p, data)
	if decided {
		return route
	}
	_ = d.g.Do(func() error {
		route = c.cudaRoute(p, data)
		return nil
	})
	return route
}

// hwRoute is DecodeRoute's answer from one header parse: sched.RouteHW when the
// hardware engines take the file, "" when no nvJPEG decoder can (the
// header does not parse: the CUDA decoder's parser would say the same), and
// decided false when only the CUDA decoder can tell.
func (c *jpegCodec) hwRoute(p *routeParser, data []byte) (route string, decided bool) {
	if p.hw == nil {
		return "", false
	}
	if p.hw.ParseHeader(data) != nil {
		return "", true
	}
	if ok, err := p.hw.BatchedSupported(); err == nil && ok {
		return sched.RouteHW, true
	}
	return "", false
}

// cudaRoute asks the CUDA decoder (see DecodeRoute), on a bound thread.
func (c *jpegCodec) cudaRoute(p *routeParser, data []byte) string {
	if p.cuda.ParseHeader(data) != nil {
		return ""
	}
	c.mu.Lock()
	ok, err := c.route.Supported(p.cuda)
	c.mu.Unlock()
	if err != nil || !ok {
		return ""
	}
	return sched.RouteCUDA
}

// parser takes a free routeParser, or makes one on a bound thread (once per
// concurrent caller over a run, up to maxRouteParsers; beyond, it waits for
// one to be returned).
func (d *Device) parser(c *jpegCodec) (*routeParser, error) {
	select {
	case p := <-c.parsers:
		return p, nil
	default:
	}
	c.mu.Lock()
	full := len(c.allParse) >= maxRouteParsers
	c.mu.Unlock()
	if full {
		return <-c.parsers, nil
	}
	p := &routeParser{}
	err := d.g.Do(func() error {
		var err error
		if p.cuda, err = c.cuda.NewStream(); err != nil {
			return err
		}
		if c.hw != nil {
			if p.hw, err = c.hw.NewStream(); err != nil {
				return errors.Join(err, p.cuda.Destroy())
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.allParse = append(c.allParse, p)
	c.mu.Unlock()
	return p, nil
}

// putParser returns p to the free list, which has room for every parser
// made.
func (c *jpegCodec) putParser(p *routeParser) { c.parsers <- p }

// forStream returns stream s's decoders: an idle set, or new ones.
func (c *jpegCodec) forStream(s sched.Stream) (*streamCodec, error) {
	c.mu.Lock()
	sc := c.streams[s]
	if sc == nil && len(c.idle) > 0 {
		sc = c.idle[len(c.idle)-1]
		c.idle = c.idle[:len(c.idle)-1]
		c.streams[s] = sc
	}
	c.mu.Unlock()
	if sc != nil {
		return sc, nil
	}
	sc = &streamCodec{c: c}
	var err error
	if sc.js, err = c.cuda.NewStream(); err != nil {
		return nil, err
	}
	if c.hw != nil {
		if sc.batch, err = c.hw.NewBatchDecoder(); err != nil {
			return nil, errors.Join(err, sc.close())
		}
	}
	c.mu.Lock()
	c.streams[s] = sc
	c.mu.Unlock()
	return sc, nil
}

// singleDecoder returns the stream's CUDA decoder, made on first use.
func (sc *streamCodec) singleDecoder() (*nvjpeg.ImageDecoder, error) {
	if sc.single == nil {
		d, err := sc.c.cuda.NewImageDecoder(nvjpeg.BackendGPUHybrid)
		if err != nil {
			return nil, err
		}
		sc.single = d
	}
	return sc.single, nil
}

// close releases the stream's decoders and scratch; its work must be done.
func (sc *streamCodec) close() error {
	var errs []error
	if sc.batch != nil {
		errs = append(errs, sc.batch.Destroy())
	}
	if sc.single != nil {
		errs = append(errs, sc.single.Destroy())
	}
	if sc.js != nil {
		errs = append(errs, sc.js.Destroy())
	}
	if sc.scratch != 0 {
		errs = append(errs, cu.MemFree(sc.scratch))
	}
	return errors.Join(errs...)
}

// dropStream takes stream s's decoders off it (DestroyStream calls it, once
// the stream's work is done) and keeps them idle for the next stream.
func (c *jpegCodec) dropStream(s sched.Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc := c.streams[s]; sc != nil {
		delete(c.streams, s)
		c.idle = append(c.idle, sc)
	}
}

// close releases everything, on a bound thread, after every stream's work.
func (c *jpegCodec) close() error {
	if c.cuda == nil {
		return nil
	}
	var errs []error
	for s := range c.streams {
		c.dropStream(s)
	}
	for _, sc := range c.idle {
		errs = append(errs, sc.close())
	}
	c.idle = nil
	for _, p := range c.allParse {
		errs = append(errs, p.cuda.Destroy())
		if p.hw != nil {
			errs = append(errs, p.hw.Destroy())
		}
	}
	c.allParse, c.parsers = nil, nil
	errs = append(errs, c.route.Destroy(), c.cuda.Destroy())
	if c.hw != nil {
		errs = append(errs, c.hw.Destroy())
	}
	c.cuda, c.hw = nil, nil
	return errors.Join(errs...)
}
