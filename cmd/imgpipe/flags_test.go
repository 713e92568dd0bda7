package main

import (
	"fmt"
	"io"
	"math/rand"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/pipeline"
)

// Every execution setting has a `run` flag, named as the setting with '-' for '_', whose
// type, default and help come from pipeline's settings table; bench's shared flags take
// theirs from the same entries.
func TestExecutionFlagsFromTable(t *testing.T) {
	kinds := map[pipeline.ParamKind]string{pipeline.Int: "int", pipeline.Bool: "bool", pipeline.Enum: "string", pipeline.String: "string"}
	runCmd := newRunCmd(io.Discard, io.Discard)
	benchCmd := newBenchCmd(io.Discard, io.Discard)
	sub := map[string]*cobra.Command{}
	for _, c := range benchCmd.Commands() {
		sub[c.Name()] = c
	}
	for _, ps := range pipeline.ExecutionSettings() {
		t.Run(ps.Name, func(t *testing.T) {
			name := strings.ReplaceAll(ps.Name, "_", "-")
			f := runCmd.Flags().Lookup(name)
			if f == nil {
				t.Fatalf("run has no --%s", name)
			}
			if want := pipeline.SettingUsage(ps) + " [$" + settingEnv(ps.Name) + "]"; f.Usage != want || !strings.HasPrefix(want, ps.Help) {
				t.Errorf("--%s help %q, want %q", name, f.Usage, want)
			}
			if f.DefValue != fmt.Sprint(ps.Default) || f.Value.Type() != kinds[ps.Kind] {
				t.Errorf("--%s: default %q, type %s; want %v, %s", name, f.DefValue, f.Value.Type(), ps.Default, kinds[ps.Kind])
			}
			var bf *cobra.Command // where bench has this setting's flag
			switch ps.Name {
			case "device", "gpu", "streams", "batch":
				bf = benchCmd
			case "workers", "pinned_mb":
				bf = sub["files"]
			default:
				return
			}
			b := bf.PersistentFlags().Lookup(name)
			if b == nil {
				b = bf.Flags().Lookup(name)
			}
			if b == nil || b.DefValue != f.DefValue || !strings.HasPrefix(b.Usage, pipeline.SettingUsage(ps)) {
				t.Errorf("bench %s --%s = %+v, want the default %q and a help starting %q", bf.Name(), name, b, f.DefValue, pipeline.SettingUsage(ps))
			}
		})
	}
	// What the derived help looks like, and the long help's defaults.
	code, stdout, _ := cli(t, "run", "--help")
	for _, want := range []string{
		"CUDA streams (GPU only) (1..64) [$IMGPIPE_STREAMS] (default 2)",
		"(auto|cpu|cuda) [$IMGPIPE_DEVICE] (default \"auto\")",
		fmt.Sprintf("streams: %d, batch: %d", pipeline.DefaultStreams, pipeline.DefaultBatch),
		fmt.Sprintf("(%d streams, batch %d)", pipeline.DefaultStreams, pipeline.DefaultBatch),
	} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("run --help (exit %d) lacks %q", code, want)
		}
	}
}

// No default or limit is written twice: the flags' defaults are the settings' defaults,
// which are DefaultExecution: the measured DefaultStreams, and batch 0 (auto: DefaultBatch,
// or the device decoder's call size).
func TestExecutionFlagDefaults(t *testing.T) {
	e := pipeline.DefaultExecution()
	if e.Streams != pipeline.DefaultStreams || e.Batch != 0 {
		t.Errorf("DefaultExecution streams %d batch %d, want %d and 0", e.Streams, e.Batch, pipeline.DefaultStreams)
	}
	fl := newRunCmd(io.Discard, io.Discard).Flags()
	for name, want := range map[string]any{"streams": e.Streams, "batch": e.Batch, "gpu": e.GPU, "device": e.Device,
		"workers": e.Workers, "pinned-mb": e.PinnedMB, "max-memory-mb": e.MaxMemoryMB, "on-error": e.OnError, "resume": e.Resume, "trace": e.Trace} {
		if got := fl.Lookup(name).DefValue; got != fmt.Sprint(want) {
			t.Errorf("--%s default %s, DefaultExecution has %v", name, got, want)
		}
	}
	bf := newBenchCmd(io.Discard, io.Discard).PersistentFlags()
	if bf.Lookup("streams").DefValue != strconv.Itoa(pipeline.DefaultStreams) || bf.Lookup("batch").DefValue != "0" {
		t.Errorf("bench --streams %s --batch %s, want %d and 0", bf.Lookup("streams").DefValue, bf.Lookup("batch").DefValue,
			pipeline.DefaultStreams)
	}
}

// A job's execution mapping, run's flags and bench's flags refuse the same values with the
// same message: the settings table's.
func TestFlagsAndJobRefuseAlike(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	write(t, dir, "in/a.png", pngBytes(t, photo(rand.New(rand.NewSource(1)), 4, 4)))
	raw, files := []string{"bench", "raw"}, []string{"bench", "files", in}
	bench := map[string][]string{"device": raw, "gpu": raw, "streams": raw, "batch": raw, "workers": files, "pinned_mb": files}
	for _, ps := range pipeline.ExecutionSettings() {
		var bad []string
		switch {
		case ps.Range != nil:
			bad = []string{strconv.FormatInt(int64(ps.Range.Min)-1, 10), strconv.FormatInt(int64(ps.Range.Max)+1, 10)}
		case ps.Kind == pipeline.Enum:
			bad = []string{"bogus"}
		}
		flag := strings.ReplaceAll(ps.Name, "_", "-")
		for _, v := range bad {
			t.Run(ps.Name+"="+v, func(t *testing.T) {
				want := pipeline.CheckSetting(ps.Name, v)
				if ps.Kind == pipeline.Int {
					n, _ := strconv.Atoi(v)
					want = pipeline.CheckSetting(ps.Name, n)
				}
				if want == nil {
					t.Fatalf("the table accepts %s=%s", ps.Name, v)
				}
				out := filepath.Join(dir, "out")
				_, _, stderr := cli(t, "run", "-i", in, "-o", out, "-p", "decode", "--"+flag+"="+v)
				if w := "imgpipe: --" + flag + ": " + want.Error() + "\n"; !strings.Contains(stderr, w) {
					t.Errorf("run --%s=%s: stderr %q, want %q", flag, v, stderr, w)
				}
				job := filepath.Join(dir, ps.Name+".yaml")
				write(t, dir, ps.Name+".yaml", []byte(fmt.Sprintf("input: {dir: %s}\noutput: {dir: %s}\npipeline: decode\nexecution:\n  %s: %s\n", in, out, ps.Name, v)))
				_, _, stderr = cli(t, "run", job)
				if w := fmt.Sprintf("%s:5:%d: execution.%s: %s\n", job, len(ps.Name)+5, ps.Name, want); !strings.Contains(stderr, w) {
					t.Errorf("job %s: %s: stderr %q, want %q", ps.Name, v, stderr, w)
				}
				if bench[ps.Name] == nil {
					return
				}
				_, _, stderr = benchCLI(t, t.Context(), append(bench[ps.Name], "--"+flag+"="+v)...)
				if w := "imgpipe: --" + flag + ": " + want.Error() + "\n"; !strings.Contains(stderr, w) {
					t.Errorf("bench --%s=%s: stderr %q, want %q", flag, v, stderr, w)
				}
			})
		}
	}
	// A list's elements are checked one by one.
	_, _, stderr := benchCLI(t, t.Context(), "bench", "raw", "--streams", "1,65")
	if w := "imgpipe: --streams: " + pipeline.CheckSetting("streams", 65).Error(); !strings.Contains(stderr, w) {
		t.Errorf("bench --streams 1,65: stderr %q, want %q", stderr, w)
	}
}
