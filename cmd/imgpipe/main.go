// Command imgpipe runs image pipelines over folders: see `imgpipe --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	// The kernel stage registers itself from a package of its own, so that the engine core links no NVRTC.
	_ "github.com/imgpipe/imgpipe/pipeline/kernelstage"
)

// stopSignals end a run cleanly (exit 130, report written, --resume carries on): Ctrl-C,
// a kill, and SIGHUP, which a closed terminal or a dropped ssh session sends.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	go func() {
		// After the first interrupt the run winds down cleanly; restore the default
		// handling so that a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
