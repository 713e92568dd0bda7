package job_test

import (
	"fmt"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

func ExampleParse() {
	j, err := job.Parse("job.yaml", []byte(`
input: {dir: photos}
pipeline:
  - decode
  - blur: {sigma: 2}
  - save: {format: jpeg}
output: {dir: out}
execution: {workers: 4, on_error: fail}
`))
	if err != nil {
		panic(err)
	}
	fmt.Println(pipeline.FormatSpec(j.Steps))
	fmt.Println(j.InputDir, "->", j.OutputDir, "workers:", j.Exec.Workers, "on_error:", j.Exec.OnError)

	_, err = job.Parse("bad.yaml", []byte("input: {dir: photos}\npipeline:\n  - decode\n  - blur: {sigma: 99}\nexecution: {devise: cpu}\n"))
	for _, e := range pipeline.Errors(err) {
		fmt.Println(e)
	}
	// Output:
	// decode | blur sigma=2 | save format=jpeg
	// photos -> out workers: 4 on_error: fail
	// bad.yaml:4:19: blur: sigma=99 is out of range (0, 32]
	// bad.yaml:5:13: execution: unknown key "devise" (did you mean "device"?)
}

func ExampleJob_Marshal() {
	j, err := job.Parse("job.yaml", []byte("input: {dir: /photos}\npipeline: [decode, {save: {format: png}}]\noutput: {dir: /out}\n"))
	if err != nil {
		panic(err)
	}
	j.Exec.Workers = 4
	fmt.Printf("%s\n", j.Marshal())
	// Output:
	// {"input":{"dir":"/photos"},"pipeline":"decode | save format=png","output":{"dir":"/out"},"execution":{"workers":"4"}}
}
