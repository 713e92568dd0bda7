package cudastage

import (
	"fmt"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// TestGPUWarmThenConcurrentDecode warms the decoder up on several streams (as
// the executor does when it starts, Config.WarmDecoder), checks that each
// stream's batched state is initialised for full calls, then decodes a batch
// on every stream at once from its own bound goroutine (as the executor's
// per-stream submitters do) and checks every image against the CPU decoder.
func TestGPUWarmThenConcurrentDecode(t *testing.T) {
	d := jpegDevice(t)
	c, _ := d.jpeg()
	const streams, batch = 3, 5
	files := make([][]byte, batch)
	for i := range files {
		files[i] = goJPEG(t, 64+8*i, 48+i, i%2 == 1)
	}
	ss := make([]sched.Stream, streams)
	err := d.g.Do(func() error {
		for i := range ss {
			s, err := d.NewStream()
			if err != nil {
				return err
			}
			ss[i] = s
			if err := d.WarmDecoder(s, batch); err != nil {
				return err
			}
			sc, err := c.forStream(s)
			if err != nil {
				return err
			}
			if want := min(batch, c.capacity); sc.batch != nil && sc.batch.Initialized() != want {
				return fmt.Errorf("stream %d: batched state initialised for %d files, want %d", i, sc.batch.Initialized(), want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.g.Do(func() error {
			for _, s := range ss {
				if err := d.DestroyStream(s); err != nil {
					t.Error(err)
				}
			}
			return nil
		})
	})
	total := 0
	for _, f := range files {
		hd, err := stages.DecodeHeader(f, stages.DecodeOptions{Orient: true})
		if err != nil {
			t.Fatal(err)
		}
		total += 3 * hd.W * hd.H
	}
	outs := make([][][]byte, streams)
	errs := make([]error, streams)
	var wg sync.WaitGroup
	for i, s := range ss {
		dst := devMem(t, d.g, uint64(total))
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = decodeOnStream(d, s, dst, files)
		}()
	}
	wg.Wait()
	for i := range ss {
		if errs[i] != nil {
			t.Fatalf("stream %d: %v", i, errs[i])
		}
		for k, f := range files {
			want, _ := cpuDecode(t, f)
			if mean, most := diff(outs[i][k], want.Pix); mean > 1 || most > 40 {
				t.Errorf("stream %d file %d: mean %.2f max %d from the CPU decoder", i, k, mean, most)
			}
		}
	}
}

// decodeOnStream decodes files into dst with one Decode call on stream s
// (decodeFiles), failing on any file's error, and returns the pixels.
func decodeOnStream(d *Device, s sched.Stream, dst cu.DevicePtr, files [][]byte) ([][]byte, error) {
	imgs, out, err := decodeFiles(d, s, files, nil, 1, func(int) cu.DevicePtr { return dst })
	for i := range imgs {
		if err == nil && imgs[i].Err != nil {
			err = fmt.Errorf("file %d: %w", i, imgs[i].Err)
		}
	}
	return out, err
}
