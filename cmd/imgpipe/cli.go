package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/imgpipe/imgpipe/cmd/imgpipe/internal/printer"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// Exit codes: folderrun's, under the names the CLI's code reads.
const (
	exitOK          = folderrun.ExitOK
	exitSomeFailed  = folderrun.ExitSomeFailed
	exitUsage       = folderrun.ExitUsage
	exitFatal       = folderrun.ExitFatal
	exitNoInputs    = folderrun.ExitNoInputs
	exitInterrupted = folderrun.ExitInterrupted
)

// exitError carries the exit code an error should end the process with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func fatalError(format string, args ...any) error {
	return &exitError{code: exitFatal, err: fmt.Errorf(format, args...)}
}

// reported is an error whose details were already printed; only its exit code matters.
type reported struct{ code int }

func (r reported) Error() string { return fmt.Sprintf("exit %d", r.code) }

// stdin is what `run -i -` and `validate -` read; tests replace it.
var stdin io.Reader = os.Stdin

// run is the whole CLI: it parses args, runs the command and returns the exit code. ctx is
// cancelled on SIGINT. Nothing here calls os.Exit, so tests drive it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	pr := printer.New(stderr) // the one writer of stderr: run --progress json makes it JSON Lines
	root := newRoot(stdout, pr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var rep reported
	if errors.As(err, &rep) {
		return rep.code
	}
	code, ours := exitCode(err)
	for _, e := range pipeline.Errors(err) {
		pr.Error(e.Error(), code)
	}
	if !ours && !pr.JSON() {
		fmt.Fprintln(stderr, "Run 'imgpipe --help' for usage.")
	}
	return code
}

// exitCode is the exit code of an error: its own, folderrun's bad request (2) or failure
// (3), or, for cobra's own errors (unknown command or flag, bad flag value), 2 with ours
// false, so that the usage hint follows.
func exitCode(err error) (code int, ours bool) {
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return ee.code, true
	case errors.As(err, new(*folderrun.RequestError)):
		return exitUsage, true
	case errors.As(err, new(*folderrun.RunError)):
		return exitFatal, true
	}
	return exitUsage, false
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := withHelp("imgpipe", &cobra.Command{
		Use:           "imgpipe",
		Short:         "Run image pipelines over folders, on the CPU or a GPU",
		SilenceUsage:  true,
		SilenceErrors: true,
	})
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(stdin)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%v%s (see 'imgpipe %s --help')", err, flagSuggestion(c, err), c.Name())
	})
	root.AddCommand(newRunCmd(stdout, stderr), newValidateCmd(stdout, stderr), newStagesCmd(stdout), newVersionCmd(stdout))
	root.AddCommand(newDevicesCmd(stdout), newServeCmd(stdout, stderr))
	root.AddCommand(newBenchCmd(stdout, stderr))
	root.AddCommand(newSubmitCmd(stdout, stderr), newWorkerCmd(stderr), newWaitCmd(stderr), newReportCmd(stdout))
	root.AddCommand(newManCmd(root, stdout))
	// --version prints what `imgpipe version` does; the template runs only when asked, so
	// no other command loads the libraries it reports on.
	root.Version = "set" // any non-empty value makes cobra add --version
	cobra.AddTemplateFunc("versionReport", versionReport)
	root.SetVersionTemplate("{{versionReport}}")
	// cobra's own `completion bash|zsh|fish|powershell` command stays: it is generated from
	// the same commands and flags, the enum flags' values included (registerEnum).
	return root
}

// flagSuggestion is "; did you mean --workers?" for pflag's error about an unknown flag
// close to one of c's, "" otherwise: cobra suggests commands, not flags.
func flagSuggestion(c *cobra.Command, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if near := pipeline.Nearest(name, names); near != "" {
		return fmt.Sprintf("; did you mean --%s?", near)
	}
	return ""
}

// printSpecErrors shows spec errors under the spec with a caret at each column; in JSON
// mode each is an error object.
func printSpecErrors(w io.Writer, spec string, err error) {
	if pr := printer.Of(w); pr.JSON() {
		for _, e := range pipeline.Errors(err) {
			pr.Error("bad pipeline spec: "+e.Error(), exitUsage)
		}
		return
	}
	fmt.Fprintf(w, "imgpipe: bad pipeline spec:\n")
	for _, e := range pipeline.Errors(err) {
		var pe *pipeline.PosError
		if errors.As(e, &pe) && pe.Pos.Col > 0 && pe.Pos.Line == 0 && !strings.ContainsAny(spec, "\n\r\t") {
			fmt.Fprintf(w, "  %s\n  %s^ col %d: %v\n", spec, strings.Repeat(" ", pe.Pos.Col-1), pe.Pos.Col, pe.Err)
			continue
		}
		fmt.Fprintf(w, "  %v\n", e)
	}
}
