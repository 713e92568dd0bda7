package job

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v4"

	"github.com/imgpipe/imgpipe/pipeline"
)

// compiledSchema compiles Schema(pipeline.Builtin) with a validator that knows draft 2020-12,
// so a schema that is not valid JSON Schema fails here.
func compiledSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	data, err := json.Marshal(Schema(pipeline.Builtin))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("job.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("job.schema.json")
	if err != nil {
		t.Fatalf("the job schema does not compile: %v", err)
	}
	return s
}

// yamlAsJSON is a YAML job as the JSON value a validator reads.
func yamlAsJSON(t *testing.T, text []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(text, &v); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestSchemaSamples checks the sample jobs against the schema: what the project ships as an
// example must be what the schema describes.
func TestSchemaSamples(t *testing.T) {
	s := compiledSchema(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "samples", "*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("samples/*.yaml: %v, %d files", err, len(files))
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(yamlAsJSON(t, text)); err != nil {
			t.Errorf("%s does not validate against the job schema: %v", f, err)
		}
	}
}

// TestSchemaAgreesWithParse checks jobs on both sides of the line: each that the schema takes,
// Parse takes, and each mistake the schema can express it refuses, as Parse does.
func TestSchemaAgreesWithParse(t *testing.T) {
	s := compiledSchema(t)
	for _, tc := range []struct {
		name, job string
		ok        bool
	}{
		{"spec string", "input: {dir: in}\npipeline: 'decode | blur sigma=1.5 | save'\n", true},
		{"list of names and maps", "input: {dir: in}\npipeline: [decode, {resize: {width: 256, height: 256, fit: inside}}, {save: {format: jpeg, quality: 75}}]\n", true},
		{"numeric enum values", "input: {dir: in}\npipeline: [{decode: {scale: 1}}, {save: {format: png, compression: 6}}]\n", true},
		{"stage spec item", "input: {dir: in}\npipeline: [decode, 'blur sigma=2', save]\n", true},
		{"execution settings", "input: {dir: in}\npipeline: [decode, save]\nexecution: {device: cpu, streams: 4, gpu: [0, 1], on_error: fail, resume: true}\n", true},
		{"device gpu", "input: {dir: in}\npipeline: [decode, save]\nexecution: {device: gpu}\n", true},
		{"bad device", "input: {dir: in}\npipeline: [decode, save]\nexecution: {device: tpu}\n", false},
		{"gpu all", "input: {dir: in}\npipeline: [decode, save]\nexecution: {gpu: all}\n", true},
		{"unknown stage", "input: {dir: in}\npipeline: [decode, {blurr: {sigma: 1}}, save]\n", false},
		{"unknown parameter", "input: {dir: in}\npipeline: [decode, {blur: {sigm: 1}}, save]\n", false},
		{"out of range", "input: {dir: in}\npipeline: [decode, {blur: {sigma: 0}}, save]\n", false},
		{"above the maximum", "input: {dir: in}\npipeline: [decode, {save: {format: jpeg, quality: 101}}]\n", false},
		{"bad enum", "input: {dir: in}\npipeline: [decode, {save: {format: pgn}}]\n", false},
		{"wrong type", "input: {dir: in}\npipeline: [decode, {resize: {width: wide}}, save]\n", false},
		{"two stages in one item", "input: {dir: in}\npipeline: [{decode: {}, save: {}}]\n", false},
		{"unknown setting", "input: {dir: in}\npipeline: [decode, save]\nexecution: {stream: 2}\n", false},
		{"setting out of range", "input: {dir: in}\npipeline: [decode, save]\nexecution: {streams: 0}\n", false},
		{"unknown top-level key", "input: {dir: in}\npipeline: [decode, save]\noutputs: {dir: out}\n", false},
		{"no pipeline (flags may give it)", "input: {dir: in}\n", true},
		{"empty list", "input: {dir: in}\npipeline: []\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Validate(yamlAsJSON(t, []byte(tc.job)))
			if (err == nil) != tc.ok {
				t.Errorf("schema: err = %v, want ok %v", err, tc.ok)
			}
			if _, perr := Parse("job.yaml", []byte(tc.job)); (perr == nil) != tc.ok {
				t.Errorf("Parse: err = %v, want ok %v (the schema and Parse disagree)", perr, tc.ok)
			}
		})
	}
}
