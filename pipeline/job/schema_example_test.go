package job_test

import (
	"encoding/json"
	"fmt"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

// The schema of job files for the builtin stages, as `imgpipe stages --json-schema` prints it;
// here the part that describes the streams setting.
func ExampleSchema() {
	s := job.Schema(pipeline.Builtin)
	execution := s["properties"].(map[string]any)["execution"].(map[string]any)
	streams := execution["properties"].(map[string]any)["streams"].(map[string]any)
	delete(streams, "description")
	b, _ := json.Marshal(streams)
	fmt.Println(s["$schema"])
	fmt.Println(string(b))
	// Output:
	// https://json-schema.org/draft/2020-12/schema
	// {"default":2,"maximum":64,"minimum":1,"type":"integer"}
}
