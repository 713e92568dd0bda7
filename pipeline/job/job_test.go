package job

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

func TestParse(t *testing.T) {
	src := `# comment
input:  {dir: samples/images}
pipeline:
  - decode
  - grayscale
  - blur: {sigma: 1.5}
  - transpose
  - histogram
  - save: {format: png}
output: {dir: out, report: out/r.jsonl}
execution: {device: cpu, streams: 8, batch: 32, workers: 3, on_error: fail, resume: true, trace: t.json}
`
	j, err := Parse("job.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if j.InputDir != "samples/images" || j.OutputDir != "out" || j.Report != "out/r.jsonl" {
		t.Errorf("paths: %+v", j)
	}
	if got := pipeline.FormatSpec(j.Steps); got != "decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png" {
		t.Errorf("steps: %s", got)
	}
	want := pipeline.Execution{Device: "cpu", GPU: "0", Streams: 8, Batch: 32, Workers: 3, OnError: "fail", Resume: true, Trace: "t.json"}
	if j.Exec != want {
		t.Errorf("exec = %+v, want %+v", j.Exec, want)
	}
	if p := j.PosOf("input.dir"); p.String() != "job.yaml:2:15" {
		t.Errorf("PosOf(input.dir) = %v", p)
	}
	if p := j.Steps[2].Pos; p.String() != "job.yaml:6:5" {
		t.Errorf("blur at %v", p)
	}
	if err := j.Complete(); err != nil {
		t.Errorf("Complete: %v", err)
	}
}

func TestParseForms(t *testing.T) {
	tests := []struct {
		name, src, spec string
	}{
		{"spec string", "input: {dir: a}\npipeline: decode | blur sigma=2 | save\n", "decode | blur sigma=2 | save"},
		{"quoted spec", "input: {dir: a}\npipeline: 'decode | save format=jpeg'\n", "decode | save format=jpeg"},
		{"one-stage spec items", "pipeline:\n  - decode max_pixels=100\n  - blur sigma=3\n", "decode max_pixels=100 | blur sigma=3"},
		{"null params", "pipeline:\n  - decode:\n  - grayscale: \n", "decode | grayscale"},
		{"block params", "pipeline:\n  - decode\n  - boxblur:\n      radius: 4\n", "decode | boxblur radius=4"},
		{"anchors", "x: &p {sigma: 2}\n", ""}, // unknown key x: checked below as an error
		{"alias params", "pipeline:\n  - decode\n  - blur: &p {sigma: 2}\n  - blur: *p\n", "decode | blur sigma=2 | blur sigma=2"},
		{"defaults", "pipeline: [decode]\n", "decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := Parse("j.yaml", []byte(tt.src))
			if tt.spec == "" {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := pipeline.FormatSpec(j.Steps); got != tt.spec {
				t.Errorf("got %q, want %q", got, tt.spec)
			}
			if j.Exec != pipeline.DefaultExecution() {
				t.Errorf("exec = %+v", j.Exec)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		errs []string // "line:col: substring", in order
	}{
		{"empty", "", []string{"1:1: empty job file"}},
		{"only a comment", "# nothing\n", []string{"1:1: empty job file"}},
		{"null document", "~\n", []string{"1:1: empty job file"}},
		{"not a mapping", "- decode\n", []string{"1:1: job: want a mapping"}},
		// Syntax errors name line and column: where the parser stopped, and where the
		// construct it was reading started when that is elsewhere.
		{"syntax", "input: {dir: a\npipeline: [decode]\n", []string{"2:9: YAML syntax: did not find expected ',' or '}' (while parsing a flow mapping at 1:8)"}},
		{"tab indentation", "input:\n\tdir: a\n", []string{"2:1: YAML syntax: found character that cannot start any token"}},
		{"unclosed quote", "input: {dir: \"a}\n", []string{"2:1: YAML syntax: found unexpected end of stream (while scanning a quoted scalar at 1:14)"}},
		{"bad indentation", "input:\n  dir: a\n dir: b\n", []string{"3:2: YAML syntax: did not find expected key"}},
		{"unknown anchor", "input: {dir: a}\npipeline: *steps\n", []string{"2:11: YAML syntax: unknown anchor 'steps' referenced"}},
		{"two documents", "input: {dir: a}\n---\ninput: {dir: b}\n", []string{"2:1: a job file holds one YAML document"}},
		{"unknown top key", "inptu: {dir: a}\n", []string{`1:1: job: unknown key "inptu" (did you mean "input"?)`}},
		{"unknown key far", "zzz: 1\n", []string{`1:1: job: unknown key "zzz" (keys: input, pipeline, output, execution)`}},
		{"unknown input key", "input: {dir: a, recursive: true}\n", []string{`1:17: input: unknown key "recursive"`}},
		{"duplicate key", "input: {dir: a}\ninput: {dir: b}\n", []string{`2:1: job: key "input" given twice (first at line 1)`}},
		{"input not a mapping", "input: photos\n", []string{`1:8: input: want a mapping (key: value), got "photos"`}},
		{"dir not a scalar", "input: {dir: [a, b]}\n", []string{`1:14: input.dir: want a value, got a list`}},
		{"empty dir", "input: {dir: ''}\n", []string{`1:14: input.dir: empty`}},
		{"null dir", "input: {dir: }\n", []string{`1:14: input.dir: want a value, got nothing`}},
		{"unknown execution key", "execution: {devise: cpu}\n", []string{`1:13: execution: unknown key "devise" (did you mean "device"?)`}},
		{"bad device", "execution: {device: gpus}\n", []string{`1:21: execution.device: device=gpus: want one of auto, cpu, cuda`}},
		{"streams out of range", "execution: {streams: 0}\n", []string{`1:22: execution.streams: streams=0 is out of range [1, 64]`}},
		{"batch not a number", "execution: {batch: many}\n", []string{`1:20: execution.batch: batch=many: want an integer`}},
		{"on_error", "execution: {on_error: ignore}\n", []string{`1:23: execution.on_error: on_error=ignore: want one of skip, fail`}},
		{"resume", "execution: {resume: sometimes}\n", []string{`1:21: execution.resume: resume=sometimes: want true or false`}},
		{"pipeline not a list", "pipeline: {decode: {}}\n", []string{`1:11: pipeline: want a list of stages or a spec string, got a mapping`}},
		{"empty pipeline", "pipeline: []\n", []string{`1:11: pipeline: empty list`}},
		{"unknown stage", "pipeline:\n  - decode\n  - blurr: {sigma: 1}\n", []string{`3:5: unknown stage "blurr" (did you mean "blur"?)`}},
		{"unknown bare stage", "pipeline:\n  - decode\n  - grayscal\n", []string{`3:5: unknown stage "grayscal" (did you mean "grayscale"?)`}},
		{"unknown param", "pipeline:\n  - decode\n  - blur: {sigm: 1}\n", []string{`3:12: blur: unknown key "sigm" (did you mean "sigma"?)`}},
		{"bad param value", "pipeline:\n  - decode\n  - blur: {sigma: 40}\n", []string{`3:19: blur: sigma=40 is out of range (0, 32]`}},
		{"param list", "pipeline:\n  - decode\n  - blur: {sigma: [1]}\n", []string{`3:19: blur.sigma: want a value, got a list`}},
		{"params on a bare stage", "pipeline:\n  - decode\n  - transpose: {x: 1}\n", []string{`3:16: transpose takes no parameters`}},
		{"params not a mapping", "pipeline:\n  - decode\n  - blur: 1.5\n", []string{`3:11: blur: want a mapping (key: value), got "1.5"`}},
		{"mis-indented params", "pipeline:\n  - decode\n  - blur:\n    sigma: 1.5\n", []string{`3:5: pipeline item: one stage per item, found keys blur, sigma`}},
		{"item is a list", "pipeline:\n  - [decode]\n", []string{`2:5: pipeline item: want a stage name`}},
		{"spec item with two stages", "pipeline:\n  - decode | save\n", []string{`2:5: pipeline item: one stage per item, found 2`}},
		{"spec string error column", "pipeline: decode | blurr\n", []string{`1:20: unknown stage "blurr"`}},
		{"quoted spec string error column", "pipeline: \"decode | blurr\"\n", []string{`1:21: unknown stage "blurr"`}},
		{"spec item param error", "pipeline:\n  - decode\n  - blur sigma=99\n", []string{`3:16: blur: sigma=99 is out of range`}},
		{"planner", "pipeline:\n  - grayscale\n  - save\n  - decode\n", []string{
			"2:5: the chain must start with decode or load, not grayscale",
			"3:5: save must be the last stage",
			"4:5: decode must be the first stage, not stage 3",
		}},
		// Stages that fail to parse do not hide the chain's order or the values that fail
		// only together: one pass reports them all, in file order.
		{"planner with bad stages", `pipeline:
  - blur: {sigma: 0}
  - decode: {scale: auto}
  - frobnicate
  - save: {format: gif}
  - resize: {}
  - "crop x=1 gravity=center"
`, []string{
			"2:5: the chain must start with decode or load, not blur",
			"2:19: blur: sigma=0 is out of range",
			"3:5: decode must be the first stage, not stage 2",
			`4:5: unknown stage "frobnicate"`,
			"5:5: save must be the last stage",
			"5:20: save: format=gif",
			"6:5: resize: give width, height or both",
			"7:6: crop: give either x, y or gravity=center, not both",
		}},
		{"spec string with bad stages", "pipeline: grayscale | blur sigma=0 | decode\n", []string{
			"1:11: the chain must start with decode or load, not grayscale",
			"1:34: blur: sigma=0 is out of range",
			"1:38: decode must be the first stage, not stage 3",
		}},
		// Every error in the file, in file order, not just the first.
		{"all errors", `input: {dir: in, extra: 1}
pipeline:
  - decode: {max_pixels: -1}
  - blur: {sigma: 0}
  - save: {format: gif}
output: {dir: out, reprot: r.jsonl}
execution: {workers: -2, on_error: maybe}
`, []string{
			`1:18: input: unknown key "extra"`,
			`3:26: decode: max_pixels=-1 is out of range`,
			`4:19: blur: sigma=0 is out of range (0, 32]`,
			`5:20: save: format=gif: want one of png, jpeg`,
			`6:20: output: unknown key "reprot" (did you mean "report"?)`,
			`7:22: execution.workers: workers=-2 is out of range [0, 4096]`,
			`7:36: execution.on_error: on_error=maybe`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("job.yaml", []byte(tt.src))
			if err == nil {
				t.Fatal("no error")
			}
			got := pipeline.Errors(err)
			if len(got) != len(tt.errs) {
				t.Fatalf("got %d errors, want %d:\n%v", len(got), len(tt.errs), err)
			}
			for i, w := range tt.errs {
				var pe *pipeline.PosError
				if !errors.As(got[i], &pe) {
					t.Errorf("error %d has no position: %v", i, got[i])
					continue
				}
				if pe.Pos.File != "job.yaml" {
					t.Errorf("error %d names file %q", i, pe.Pos.File)
				}
				if msg := got[i].Error(); !strings.Contains(msg, w) {
					t.Errorf("error %d = %q, want it to contain %q", i, msg, w)
				}
			}
		})
	}
}

func TestJobComplete(t *testing.T) {
	tests := []struct {
		src  string
		want []string
	}{
		{"pipeline: [decode, save]\n", []string{"no input folder", "no output folder"}},
		{"input: {dir: a}\n", []string{"no pipeline", "no output folder"}},
		{"input: {dir: a}\npipeline: [decode, histogram]\noutput: {report: r.jsonl}\n", nil}, // nothing saved: a report is enough
		{"input: {dir: a}\npipeline: [decode, save]\noutput: {report: r.jsonl}\n", []string{"no output folder"}},
	}
	for _, tt := range tests {
		j, err := Parse("j.yaml", []byte(tt.src))
		if err != nil {
			t.Fatalf("%q: %v", tt.src, err)
		}
		errs := pipeline.Errors(j.Complete())
		if len(errs) != len(tt.want) {
			t.Errorf("%q: got %v, want %v", tt.src, errs, tt.want)
			continue
		}
		for i, w := range tt.want {
			if !strings.Contains(errs[i].Error(), w) || !strings.HasPrefix(errs[i].Error(), "j.yaml:1:1: ") {
				t.Errorf("%q: error %d = %v, want j.yaml:1:1: ...%s", tt.src, i, errs[i], w)
			}
		}
	}
}

func TestLoad(t *testing.T) {
	for _, name := range []string{"job.yaml", "thumbs.yaml"} {
		if _, err := Load(filepath.Join("..", "..", "samples", name)); err != nil {
			t.Errorf("sample %s: %v", name, err)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", maxJobBytes)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "byte limit") {
		t.Errorf("big file: %v", err)
	}
}

func TestJobExecutionGPU(t *testing.T) {
	j, err := Parse("job.yaml", []byte("execution: {device: cuda, gpu: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if j.Exec.GPU != "2" || j.Exec.Device != "cuda" {
		t.Errorf("exec = %+v, want device cuda, gpu 2", j.Exec)
	}
	if p := j.PosOf("execution.gpu"); p.String() != "job.yaml:1:32" {
		t.Errorf("PosOf(execution.gpu) = %v", p)
	}
	j, err = Parse("job.yaml", []byte("execution: {device: cuda}\n"))
	if err != nil || j.Exec.GPU != "0" {
		t.Errorf("no gpu key: %v, gpu %s; want the default 0", err, j.Exec.GPU)
	}
	for src, want := range map[string]pipeline.GPUSet{"gpu: all": "all", "gpu: [0, 2, 3]": "0,2,3", "gpu: [1]": "1", `gpu: "3, 1"`: "3,1"} {
		j, err := Parse("job.yaml", []byte("execution: {"+src+"}\n"))
		if err != nil || j.Exec.GPU != want {
			t.Errorf("%s: %v, gpu %s; want %s", src, err, j.Exec.GPU, want)
		}
	}

	bad := []struct {
		name, src, want string
	}{
		{"negative", "execution: {gpu: -1}\n", "job.yaml:1:18: execution.gpu: gpu=-1: ordinal -1 out of range (0..1023)"},
		{"not a number", "execution: {gpu: first}\n", `job.yaml:1:18: execution.gpu: gpu=first: "first" is not a GPU ordinal`},
		{"fraction", "execution: {gpu: 0.5}\n", `job.yaml:1:18: execution.gpu: gpu=0.5: "0.5" is not a GPU ordinal`},
		{"too high", "execution:\n  gpu: 4096\n", "job.yaml:2:8: execution.gpu: gpu=4096: ordinal 4096 out of range (0..1023)"},
		{"list with a duplicate", "execution: {gpu: [0, 1, 0]}\n", "job.yaml:1:18: execution.gpu: gpu=0,1,0: GPU 0 named twice"},
		{"empty list", "execution: {gpu: []}\n", `job.yaml:1:18: execution.gpu: gpu=: "" is not a GPU ordinal`},
		{"list of lists", "execution: {gpu: [[0]]}\n", "job.yaml:1:18: execution.gpu: want a value"},
		{"misspelt", "execution: {gpus: 1}\n", `job.yaml:1:13: execution: unknown key "gpus" (did you mean "gpu"?)`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("job.yaml", []byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) = %v, want %q", tt.src, err, tt.want)
			}
		})
	}
}

// A job with field errors still comes back, holding its valid fields, so that validate can go
// on to check its paths; a syntax error gives none.
func TestParsePartialJob(t *testing.T) {
	j, err := Parse("job.yaml", []byte("input: {dir: in}\npipeline: [decode, blurr]\noutput: {dir: out}\n"))
	if err == nil || j == nil || j.InputDir != "in" || j.OutputDir != "out" || len(j.Steps) != 0 {
		t.Errorf("field error: job %+v, error %v; want the valid fields and the error", j, err)
	}
	if j, err := Parse("job.yaml", []byte("input: {dir: in\n")); err == nil || j != nil {
		t.Errorf("syntax error: job %+v, error %v; want no job", j, err)
	}
}

// A job keeps the plan its chain compiled to when it was read, so that a run binds each
// stage once (the kernel stage's binder compiles with NVRTC).
func TestParseKeepsPlan(t *testing.T) {
	binds := 0
	counted := &pipeline.StageDef{Name: "counted", Kind: pipeline.PixelKind, Help: "counts its bindings",
		Shape: func(in stages.Shape, _ pipeline.Params) (stages.Shape, bool) { return in, true },
		CPU: func(pipeline.Params) (pipeline.CPUFunc, error) {
			binds++
			return func(dst, src *stages.Image, _ *[256]uint64) {}, nil
		}}
	reg, err := pipeline.NewRegistry(append(pipeline.Builtin.Stages(), counted)...)
	if err != nil {
		t.Fatal(err)
	}
	j, err := ParseWith(reg, "job.yaml", []byte("input: {dir: in}\npipeline: decode | counted | save\noutput: {dir: out}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if j.Plan == nil || j.Plan.String() != pipeline.FormatSpec(j.Steps) || binds != 1 {
		t.Errorf("plan %v for %q, %d bindings; want the chain's, bound once", j.Plan, pipeline.FormatSpec(j.Steps), binds)
	}
}
