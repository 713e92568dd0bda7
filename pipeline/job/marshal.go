package job

import (
	"encoding/json"

	"github.com/imgpipe/imgpipe/pipeline"
)

// Marshal writes the job as a job file that Parse reads back to the same folders, report,
// chain and settings: JSON, which the YAML schema reads as it is, with the chain as one
// spec and only the settings that differ from pipeline.DefaultExecution. It is what a
// client sends a server for the job it built from flags and a file (POST /v1/jobs).
func (j *Job) Marshal() []byte {
	type output struct {
		Dir    string `json:"dir,omitempty"`
		Report string `json:"report,omitempty"`
	}
	doc := struct {
		Input     map[string]string `json:"input,omitempty"`
		Pipeline  string            `json:"pipeline,omitempty"`
		Output    *output           `json:"output,omitempty"`
		Execution map[string]string `json:"execution,omitempty"`
	}{Pipeline: pipeline.FormatSpec(j.Steps)}
	if j.InputDir != "" {
		doc.Input = map[string]string{"dir": j.InputDir}
	}
	if j.OutputDir != "" || j.Report != "" {
		doc.Output = &output{j.OutputDir, j.Report}
	}
	def := pipeline.DefaultExecution()
	for _, ps := range pipeline.ExecutionSettings() {
		if v := j.Exec.Text(ps.Name); v != def.Text(ps.Name) {
			if doc.Execution == nil {
				doc.Execution = map[string]string{}
			}
			doc.Execution[ps.Name] = v
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic("job: marshal: " + err.Error()) // strings and maps of strings always marshal
	}
	return b
}
