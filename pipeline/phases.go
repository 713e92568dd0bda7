package pipeline

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/imgpipe/imgpipe/stages"
)

// PhaseSeconds are where a run's time went, summed over its inputs: reading files,
// decoding them, the pixel stages on the CPU, encoding the output and writing it (the rest
// of the sink's work: the file writes, fsync and rename of the atomic save). They are worker
// time, so with N workers busy they add up to about N × the wall time; divided by the
// inputs they give each phase's time per image, which shows the bottleneck. On a GPU, the
// pixel stages run on the device (see the Summary's device times) and Chain counts only
// the images that ran on the CPU path.
type PhaseSeconds struct {
	Read   float64 `json:"read"`
	Decode float64 `json:"decode"`
	Chain  float64 `json:"chain"`
	Encode float64 `json:"encode"`
	Write  float64 `json:"write"`
}

// phaseClock accumulates PhaseSeconds from concurrent workers.
type phaseClock struct {
	read, decode, chain, encode, write atomic.Int64 // nanoseconds
}

func (p *phaseClock) seconds() PhaseSeconds {
	s := func(v *atomic.Int64) float64 { return round6(time.Duration(v.Load()).Seconds()) }
	return PhaseSeconds{Read: s(&p.read), Decode: s(&p.decode), Chain: s(&p.chain), Encode: s(&p.encode), Write: s(&p.write)}
}

// since adds the time since start to a phase.
func since(v *atomic.Int64, start time.Time) { v.Add(int64(time.Since(start))) }

// timedEncoder wraps enc so that the time it spends encoding, without the time its
// writes to the sink take, is added to the encode phase; the caller charges the rest of
// the sink's work to the write phase. encoded receives the encode time of each call.
func (p *phaseClock) timedEncoder(enc *Encoder, encoded *time.Duration) *Encoder {
	return &Encoder{Ext: enc.Ext, Encode: func(w io.Writer, m *stages.Image) error {
		tw := &timedWriter{w: w}
		start := time.Now()
		err := enc.Encode(tw, m)
		*encoded = time.Since(start) - tw.d
		p.encode.Add(int64(*encoded))
		return err
	}}
}

// timedWriter measures the time spent in its writes.
type timedWriter struct {
	w io.Writer
	d time.Duration
}

func (t *timedWriter) Write(b []byte) (int, error) {
	start := time.Now()
	n, err := t.w.Write(b)
	t.d += time.Since(start)
	return n, err
}
