package server_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/imgpipe/imgpipe/server"
)

// A client submits a job to a running imgpipe serve, follows it to its end and lists its
// first failures, as imgpipe run --server does.
func ExampleClient_Failures() {
	c := &server.Client{URL: "http://127.0.0.1:8080", Token: os.Getenv("IMGPIPE_TOKEN")}
	ctx := context.Background()
	j, err := c.Submit(ctx, []byte(`{"input":{"dir":"/srv/photos"},"pipeline":"decode | save format=png","output":{"dir":"/srv/out"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	if j, err = c.Wait(ctx, j.ID, 200*time.Millisecond, nil); err != nil {
		fmt.Println(err)
		return
	}
	failed, err := c.Failures(ctx, j.ID, 10)
	for _, l := range failed {
		fmt.Printf("%s: %s\n", l.Input, l.Error)
	}
	fmt.Println(j.State, j.ExitCode, err)
}
