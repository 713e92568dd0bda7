package job

import (
	"strconv"

	"github.com/imgpipe/imgpipe/pipeline"
)

// SchemaDialect is the JSON Schema dialect that Schema writes.
const SchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// Schema returns a JSON Schema (draft 2020-12) of job files whose stages come from reg: the
// stages with their parameters' types, ranges, values and defaults, and the execution
// settings, for editors and job generators. Load stays the judge: it also checks what a
// schema cannot say (the chain's order, values that fail only together, paths).
func Schema(reg *pipeline.Registry) map[string]any {
	stages := reg.Stages()
	step := make([]any, 0, len(stages)+1)
	step = append(step, map[string]any{"type": "string", "description": "a stage name, or one stage as a spec: blur sigma=1.5"})
	for _, d := range stages {
		step = append(step, map[string]any{
			"type":                 "object",
			"properties":           map[string]any{d.Name: map[string]any{"type": []any{"object", "null"}, "description": d.Help, "properties": params(d.Params), "additionalProperties": false}},
			"required":             []any{d.Name},
			"additionalProperties": false,
		})
	}
	text := func(help string) map[string]any { return map[string]any{"type": "string", "description": help} }
	return map[string]any{
		"$schema":              SchemaDialect,
		"title":                "imgpipe job file",
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"input": object(map[string]any{"dir": text("input folder, file or bucket URL")}),
			"output": object(map[string]any{
				"dir":    text("output folder or bucket URL"),
				"report": text("the JSON Lines report (default: imgpipe-report.jsonl in the output folder)"),
			}),
			"execution": object(settings()),
			"pipeline": map[string]any{
				"description": "the chain: one spec string, or a list of stages",
				"oneOf": []any{
					map[string]any{"type": "string"},
					map[string]any{"type": "array", "minItems": 1, "maxItems": pipeline.MaxSteps, "items": map[string]any{"anyOf": step}},
				},
			},
		},
	}
}

// object is the schema of a mapping with exactly the keys props names, none required.
func object(props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

// settings is the schema of the execution mapping: the settings' own specs, except gpu, which
// also takes a number and a list of numbers (gpu: 2, gpu: [0, 2, 3]), and device, which also
// takes the spelling gpu that the setting reads as cuda.
func settings() map[string]any {
	out := map[string]any{}
	for _, ps := range pipeline.ExecutionSettings() {
		s := param(ps)
		if ps.Name == "device" {
			s["enum"] = append(s["enum"].([]any), "gpu")
		}
		if ps.Name == "gpu" {
			s = map[string]any{"description": ps.Help, "default": ps.Default, "anyOf": []any{
				map[string]any{"type": "string"},
				map[string]any{"type": "integer", "minimum": 0},
				map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"type": "integer", "minimum": 0}},
			}}
		}
		out[ps.Name] = s
	}
	return out
}

// params is the schema of a stage's parameter mapping.
func params(specs []pipeline.ParamSpec) map[string]any {
	out := make(map[string]any, len(specs))
	for _, ps := range specs {
		out[ps.Name] = param(ps)
	}
	return out
}

// param is the schema of one parameter's value as YAML writes it. An enum value that reads as
// a number is also allowed as that number, since YAML gives `scale: 1` and `compression: 6`
// as numbers.
func param(ps pipeline.ParamSpec) map[string]any {
	s := map[string]any{"description": ps.Help}
	if ps.Default != nil && ps.Default != "" {
		s["default"] = ps.Default
	}
	switch ps.Kind {
	case pipeline.Int, pipeline.Float:
		s["type"] = "number"
		if ps.Kind == pipeline.Int {
			s["type"] = "integer"
		}
		if r := ps.Range; r != nil {
			s["maximum"] = r.Max
			if r.MinOpen {
				s["exclusiveMinimum"] = r.Min
			} else {
				s["minimum"] = r.Min
			}
		}
	case pipeline.Bool:
		s["type"] = "boolean"
	case pipeline.String:
		s["type"] = "string"
	case pipeline.Enum:
		values := make([]any, 0, len(ps.Values))
		for _, v := range ps.Values {
			values = append(values, v)
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				values = append(values, n)
			}
		}
		s["enum"] = values
	}
	return s
}
