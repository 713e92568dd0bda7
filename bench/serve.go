package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// ThumbnailSpec is the chain a serve load sends by default: the thumbnail request.
const ThumbnailSpec = "decode | resize width=256 height=256 fit=inside | save format=jpeg quality=75"

// DefaultFolderFiles is the folder run's size for a bare --folder-rate: the issue's
// 600-photo thumbnail job.
const DefaultFolderFiles = 600

// Limits of a serve load's settings, checked before anything starts.
const (
	MaxClients  = 10_000    // --clients
	MaxRequests = 1 << 30   // --requests, --warm-requests, --folder-files
	MaxDuration = time.Hour // --duration
)

// ServeConfig says what a serve load sends, to what, and how hard.
type ServeConfig struct {
	Dir  string // the photo folder: every JPEG and PNG under it, held in memory
	Spec string // the chain (in-process and --url); ThumbnailSpec when empty

	// The target: an Engine opened here with Exec and GPUs (neither URL nor Get), an
	// imgpipe serve at URL, or GET requests of the template Get, {name} replaced by the
	// photo's path under Dir (a peer such as imgproxy).
	Exec  pipeline.Execution
	GPUs  folderrun.GPUs
	Delay time.Duration // the engine's batching delay (engine.Config.Delay)
	URL   string
	Get   string
	Token string // a bearer token for URL

	Clients      int           // concurrent clients of the saturated run
	Requests     int           // requests per measured run; 0: Duration
	Duration     time.Duration // length of each measured run, when Requests is 0
	WarmRequests int           // untimed requests first
	// Load are fractions of the saturated rate at which an open loop then runs, each
	// reporting its latency; Poisson spaces its arrivals as a Poisson process (else evenly).
	Load    []float64
	Poisson bool
	// FolderFiles, when above 0, runs the chain once as a folder job over that many files
	// (the photos repeated) and reports its rate against the saturated load's.
	FolderFiles int
	RSSEvery    int // read the RSS every that many requests of the saturated run (0: at the end only)
	RSSPid      int // the process whose RSS is read (0: this one)

	Text   io.Writer        // the human-readable lines; nil discards them
	JSON   io.Writer        // receives the ServeReport as one JSON object, when set
	Notice func(msg string) // warnings
}

// Flags registers c's settings on fs, as `imgpipe bench serve` spells them; the execution
// settings (device, streams, batch, workers) are the caller's.
func (c *ServeConfig) Flags(fs *pflag.FlagSet) {
	fs.StringVarP(&c.Spec, "pipeline", "p", ThumbnailSpec, "the chain each request runs (in-process and --url)")
	fs.DurationVar(&c.Delay, "delay", engine.DefaultDelay, "in-process: how long a device batch waits for more requests")
	fs.StringVar(&c.URL, "url", "", "load a running 'imgpipe serve' at this base URL (POST /v1/process)")
	fs.StringVar(&c.Get, "get", "", "load a peer with GET requests of this URL template; {name} is the photo's path")
	fs.StringVar(&c.Token, "token", "", "--url: the bearer token of the server")
	fs.IntVar(&c.Clients, "clients", 64, "concurrent clients of the saturated run")
	fs.IntVar(&c.Requests, "requests", 0, "requests per measured run (default: run for --duration)")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "length of each measured run without --requests")
	fs.IntVar(&c.WarmRequests, "warm-requests", -1, "untimed requests first (default 2 per client)")
	fs.Float64SliceVar(&c.Load, "load", nil, "then open loops at these fractions of the saturated rate: 0.5,0.9")
	fs.BoolVar(&c.Poisson, "poisson", true, "open loops: Poisson arrivals (false: evenly spaced)")
	fs.IntVar(&c.FolderFiles, "folder-rate", 0, "also run the chain as a folder job over N files (the photos repeated) and compare; alone: "+strconv.Itoa(DefaultFolderFiles))
	fs.Lookup("folder-rate").NoOptDefVal = strconv.Itoa(DefaultFolderFiles)
	fs.IntVar(&c.RSSEvery, "rss-every", 0, "print the RSS every N requests of the saturated run")
	fs.IntVar(&c.RSSPid, "rss-pid", 0, "read the RSS of this process (a server's) instead of this one")
}

// Check reports c's bad settings, each naming its flag, and fills in the defaults.
func (c *ServeConfig) Check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.URL != "" && c.Get != "" {
		bad("--url and --get name two targets; give one")
	}
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("--url %q: want http://HOST:PORT", c.URL)
		}
	}
	if c.Get != "" && !strings.Contains(c.Get, "{name}") {
		bad("--get %q: the template has no {name}", c.Get)
	}
	if c.Get != "" {
		if u, err := url.Parse(strings.ReplaceAll(c.Get, "{name}", "x")); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("--get %q: want an http:// URL template", c.Get)
		}
	}
	if c.Token != "" && c.URL == "" {
		bad("--token is for --url")
	}
	checkRange := func(flag string, v, lo, hi int) {
		if v < lo || v > hi {
			bad("--%s %d out of range [%d, %d]", flag, v, lo, hi)
		}
	}
	checkRange("clients", c.Clients, 1, MaxClients)
	checkRange("requests", c.Requests, 0, MaxRequests)
	checkRange("folder-rate", c.FolderFiles, 0, MaxRequests)
	checkRange("rss-every", c.RSSEvery, 0, MaxRequests)
	checkRange("rss-pid", c.RSSPid, 0, math.MaxInt32)
	if c.WarmRequests < 0 {
		c.WarmRequests = 2 * c.Clients
	}
	checkRange("warm-requests", c.WarmRequests, 0, MaxRequests)
	if c.Requests == 0 && (c.Duration <= 0 || c.Duration > MaxDuration) {
		bad("--duration %v out of range (0, %v]", c.Duration, MaxDuration)
	}
	if c.Delay < 0 {
		bad("--delay %v is negative", c.Delay)
	}
	for _, f := range c.Load {
		if !(f > 0 && f <= 1) {
			bad("--load %g: each fraction is in (0, 1]", f)
		}
	}
	if c.Spec == "" {
		c.Spec = ThumbnailSpec
	}
	if len(errs) > 0 {
		return &OptionError{Err: pipeline.ErrorList(errs)}
	}
	return nil
}

// ServeReport is what a serve load measured.
type ServeReport struct {
	Target  string  `json:"target"` // "in-process", the --url or the --get template
	Device  string  `json:"device,omitempty"`
	Spec    string  `json:"pipeline,omitempty"`
	Photos  int     `json:"photos"`
	PhotoMP float64 `json:"photo_mp_mean"`
	// Saturated is the closed loop of Clients clients; Loads the open loops after it.
	Saturated Phase       `json:"saturated"`
	Loads     []Phase     `json:"loads,omitempty"`
	Folder    *FolderRate `json:"folder,omitempty"`
	// RSS is the process's at the end; RSSSamples every RSSEvery requests.
	RSS        *RSS  `json:"rss,omitempty"`
	RSSSamples []RSS `json:"rss_samples,omitempty"`
}

// Serve runs the load c describes and prints (and, with c.JSON, writes) its report.
func Serve(ctx context.Context, c ServeConfig) (_ *ServeReport, err error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	photos, err := loadPhotos(c.Dir)
	if err != nil {
		return nil, err
	}
	var plan *pipeline.Plan
	if c.Get == "" || c.FolderFiles > 0 {
		if plan, err = pipeline.CompileSpec(c.Spec); err != nil {
			return nil, &OptionError{Err: fmt.Errorf("--pipeline: %w", err)}
		}
	}
	rep := &ServeReport{Target: "in-process", Photos: len(photos)}
	for _, p := range photos {
		rep.PhotoMP += p.mp / float64(len(photos))
	}
	rep.PhotoMP = round3(rep.PhotoMP)
	var e *engine.Engine
	open := func() (err error) {
		e, err = engine.Open(engine.Config{Exec: c.Exec, GPUs: c.GPUs, Delay: c.Delay, Notice: c.Notice})
		return err
	}
	defer func() {
		if e != nil {
			err = errors.Join(err, e.Close())
		}
	}()
	if c.URL == "" && c.Get == "" {
		if err := open(); err != nil {
			return nil, err
		}
	}
	var t target
	switch {
	case c.URL != "":
		t, rep.Target, rep.Spec = newHTTPTarget(&c), c.URL, c.Spec
	case c.Get != "":
		t, rep.Target = newHTTPTarget(&c), c.Get
	default:
		t, rep.Device, rep.Spec = engineTarget{e: e, plan: plan}, e.Device(), c.Spec
	}
	where := rep.Target
	if e != nil {
		where = "an engine in the process on " + rep.Device
	}
	c.textf("imgpipe bench serve: %s, %d photos (%.1f MP mean), %d clients\n", where, len(photos), rep.PhotoMP, c.Clients)
	if err := c.load(ctx, t, e, photos, rep); err != nil {
		return rep, err
	}
	if c.FolderFiles > 0 {
		// Only now for a server's load: an engine here would have shared its device.
		if e == nil {
			if err := open(); err != nil {
				return rep, err
			}
		}
		f, err := folderRate(ctx, e, plan, c.Exec, c.Dir, photos, c.FolderFiles)
		if err != nil {
			return rep, err
		}
		if f.ImgPerS > 0 {
			f.ServeRatio = round3(rep.Saturated.ReqPerS / f.ImgPerS)
		}
		rep.Folder = &f
		c.textf("folder run (%d files, on %s): %s img/s; serve / folder = %.2f\n", f.Files, e.Device(), fmtRate(f.ImgPerS), f.ServeRatio)
	}
	return rep, c.finish(rep)
}

// finish reads the final RSS into rep, and writes rep as JSON when asked to.
func (c *ServeConfig) finish(rep *ServeReport) error {
	if r, err := readRSS(c.RSSPid); err == nil {
		rep.RSS = &r
		c.textf("RSS%s: peak %.1f MiB, now %.1f MiB\n", c.rssWhose(), r.PeakMiB, r.MiB)
	} else {
		c.notice("RSS: %v", err)
	}
	if c.JSON != nil {
		if err := json.NewEncoder(c.JSON).Encode(rep); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	return nil
}

// load runs the warm-up, the saturated closed loop and the open loops into rep.
func (c *ServeConfig) load(ctx context.Context, t target, e *engine.Engine, photos []photo, rep *ServeReport) error {
	if c.WarmRequests > 0 {
		warm, _ := closedLoop(ctx, t, photos, c.Clients, c.WarmRequests, 0, nil)
		if w := phase("warm-up", warm, time.Second); w.OK == 0 {
			return fmt.Errorf("no warm-up request succeeded: %s", w.errorsText())
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	before := batchesOf(e)
	var after func(int)
	if c.RSSEvery > 0 {
		var mu sync.Mutex // clients finish requests at once
		after = func(done int) {
			if done%c.RSSEvery != 0 {
				return
			}
			r, err := readRSS(c.RSSPid)
			if err != nil {
				return // the final reading says why
			}
			r.Requests = done
			mu.Lock()
			defer mu.Unlock()
			rep.RSSSamples = append(rep.RSSSamples, r)
			c.textf("RSS%s after %d requests: %.1f MiB (peak %.1f MiB)\n", c.rssWhose(), done, r.MiB, r.PeakMiB)
		}
	}
	s, wall := closedLoop(ctx, t, photos, c.Clients, c.Requests, c.Duration, after)
	rep.Saturated = phase("saturated", s, wall)
	rep.Saturated.Clients = c.Clients
	rep.Saturated.Batches = batchesOf(e).since(before)
	c.printPhase(&rep.Saturated)
	if rep.Saturated.ReqPerS == 0 && len(c.Load) > 0 {
		return errors.New("--load: the saturated run had no successful request to take a rate from")
	}
	rng := rand.New(rand.NewPCG(1, 2)) // the same arrivals every run
	for _, f := range c.Load {
		if err := ctx.Err(); err != nil {
			return err
		}
		rate := f * rep.Saturated.ReqPerS
		n := c.Requests
		if n == 0 {
			n = max(1, int(rate*c.Duration.Seconds()))
		}
		before := batchesOf(e)
		s, wall := openLoop(ctx, t, photos, arrivals(rate, n, c.Poisson, rng))
		p := phase("load "+strconv.FormatFloat(f, 'g', -1, 64), s, wall)
		p.TargetRate, p.Batches = round3(rate), batchesOf(e).since(before)
		rep.Loads = append(rep.Loads, p)
		c.printPhase(&p)
	}
	return ctx.Err()
}

func (c *ServeConfig) printPhase(p *Phase) {
	how := fmt.Sprintf("%d clients", p.Clients)
	if p.TargetRate > 0 {
		how = fmt.Sprintf("open loop at %s req/s", fmtRate(p.TargetRate))
	}
	l := p.LatencyMS
	c.textf("%s (%s): %d of %d requests ok in %.2f s: %s req/s, %s MP/s\n", p.Name, how, p.OK, p.Requests, p.Seconds, fmtRate(p.ReqPerS), fmtRate(p.MpixPerS))
	c.textf("  latency ms: p50 %.2f, p90 %.2f, p99 %.2f, max %.2f; errors: %s\n", l.P50, l.P90, l.P99, l.Max, p.errorsText())
	if b := p.Batches; b != nil {
		c.textf("  device batches: %d, mean %.1f images; by size %s\n", b.Count, b.Mean, b.text())
	}
}

func (c *ServeConfig) rssWhose() string {
	if c.RSSPid > 0 {
		return fmt.Sprintf(" of process %d", c.RSSPid)
	}
	return ""
}

func (c *ServeConfig) textf(format string, args ...any) {
	if c.Text != nil {
		fmt.Fprintf(c.Text, format, args...)
	}
}

func (c *ServeConfig) notice(format string, args ...any) {
	if c.Notice != nil {
		c.Notice(fmt.Sprintf(format, args...))
	}
}

// Batches counts device batches by images: Sizes["≤8"] those of 5 to 8 images, on
// engine.BatchBuckets.
type Batches struct {
	Count int               `json:"count"`
	Mean  float64           `json:"mean"`
	Sizes map[string]uint64 `json:"sizes"`
	hist  engine.Histogram
}

// batchesOf is e's batch histogram so far; nil without an engine.
func batchesOf(e *engine.Engine) *Batches {
	if e == nil {
		return nil
	}
	return &Batches{hist: e.Stats().BatchSizes}
}

// since is the batches of b not in before; nil when there were none (on the CPU).
func (b *Batches) since(before *Batches) *Batches {
	if b == nil || before == nil {
		return nil
	}
	out := &Batches{Sizes: map[string]uint64{}}
	for i, n := range b.hist.Counts {
		n -= before.hist.Counts[i]
		if n == 0 {
			continue
		}
		out.Count += int(n)
		key := ">" + strconv.FormatFloat(b.hist.Bounds[len(b.hist.Bounds)-1], 'g', -1, 64)
		if i < len(b.hist.Bounds) {
			key = "≤" + strconv.FormatFloat(b.hist.Bounds[i], 'g', -1, 64)
		}
		out.Sizes[key] = n
	}
	if out.Count == 0 {
		return nil
	}
	out.Mean = round3((b.hist.Sum - before.hist.Sum) / float64(out.Count))
	return out
}

// text is "≤1: 3, ≤8: 40", smallest first.
func (b *Batches) text() string {
	var parts []string
	for _, bound := range append(engine.BatchBuckets, math.Inf(1)) {
		key := "≤" + strconv.FormatFloat(bound, 'g', -1, 64)
		if math.IsInf(bound, 1) {
			key = ">" + strconv.FormatFloat(engine.BatchBuckets[len(engine.BatchBuckets)-1], 'g', -1, 64)
		}
		if n, ok := b.Sizes[key]; ok {
			parts = append(parts, fmt.Sprintf("%s: %d", key, n))
		}
	}
	return strings.Join(parts, ", ")
}
