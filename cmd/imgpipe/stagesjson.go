package main

import (
	"encoding/json"
	"io"

	"github.com/imgpipe/imgpipe/pipeline"
)

// stageSchema is one stage in `imgpipe stages --json`: the registry's definition as data, for
// editors, UIs and job generators. It is not a JSON Schema; `imgpipe validate` checks job files.
type stageSchema struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // source, pixel or sink
	GPU  bool   `json:"gpu"`  // the stage also runs on a GPU, with the same bits
	// GPUOnly says why the stage runs only on a GPU (it has no CPU implementation).
	GPUOnly string        `json:"gpu_only,omitempty"`
	Help    string        `json:"help"`
	Doc     string        `json:"doc,omitempty"`
	Params  []paramSchema `json:"params"`
}

// paramSchema is one parameter: its type ("int", "float", "bool", "string" or "enum"),
// default, bounds and values.
type paramSchema struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Default any      `json:"default"`
	Min     *float64 `json:"min,omitempty"`
	Max     *float64 `json:"max,omitempty"`
	MinOpen bool     `json:"min_exclusive,omitempty"` // min itself is not allowed
	Values  []string `json:"values,omitempty"`
	Help    string   `json:"help"`
}

// writeStagesJSON writes defs as a JSON array of stageSchema.
func writeStagesJSON(w io.Writer, defs []*pipeline.StageDef) error {
	out := make([]stageSchema, 0, len(defs))
	for _, d := range defs {
		s := stageSchema{Name: d.Name, Kind: d.Kind.String(), GPU: d.GPU != nil, GPUOnly: d.GPUOnly, Help: d.Help, Doc: d.Doc, Params: []paramSchema{}}
		for _, ps := range d.Params {
			p := paramSchema{Name: ps.Name, Type: ps.Kind.String(), Default: ps.Default, Values: ps.Values, Help: ps.Help}
			if r := ps.Range; r != nil {
				p.Min, p.Max, p.MinOpen = &r.Min, &r.Max, r.MinOpen
			}
			s.Params = append(s.Params, p)
		}
		out = append(out, s)
	}
	return writeJSON(w, out)
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
