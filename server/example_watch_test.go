package server_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/imgpipe/imgpipe/server"
)

// A client submits a job to a running imgpipe serve and follows it to its end.
func ExampleClient_Wait() {
	c := &server.Client{URL: "http://127.0.0.1:8080", Token: os.Getenv("IMGPIPE_TOKEN")}
	ctx := context.Background()
	j, err := c.Submit(ctx, []byte(`{"input":{"dir":"/srv/photos"},"pipeline":"decode | save format=png","output":{"dir":"/srv/out"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	j, err = c.Wait(ctx, j.ID, 200*time.Millisecond, func(j server.Job) {
		fmt.Printf("%d of %d\n", j.Progress.Done, j.Progress.Total)
	})
	fmt.Println(j.State, j.ExitCode, err)
}
