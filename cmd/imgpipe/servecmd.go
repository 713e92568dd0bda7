package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/server"
)

// serveFlags are `imgpipe serve`'s own flags; the engine's execution settings are the
// flags of the same names as run's (settingFlags).
type serveFlags struct {
	listen, tokenFile, signKeyFile string
	allowRoots                     []string
	maxBody                        int64
	maxRequests                    int
	requestTimeout, delay          time.Duration
	insecure                       bool
	allowBuckets, allowKernels     bool
}

// engineSettings are the execution settings an Engine is opened with (engine.Config.Exec);
// the others (on_error, resume, trace, shard, gpu_wait) are each job's own.
var engineSettings = []string{"device", "gpu", "streams", "batch", "pinned_mb", "max_memory_mb", "workers"}

func newServeCmd(stdout, stderr io.Writer) *cobra.Command {
	var f serveFlags
	cmd := withHelp("serve", &cobra.Command{
		Use:   "serve [flags]",
		Short: "Keep one engine open and answer HTTP requests and jobs on it",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runServe(cmd, &f, stderr) },
	})
	settingFlags(cmd, false, engineSettings...)
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", server.DefaultListen, "host:port to listen on; a host other than loopback needs a token (or --insecure)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token requests must carry [$IMGPIPE_TOKEN]")
	fl.StringVar(&f.signKeyFile, "sign-key-file", "", "file holding the key process URLs must be signed with ('imgpipe serve sign')")
	fl.StringArrayVar(&f.allowRoots, "allow-root", nil, "folder jobs may read and write under (repeatable; without one, jobs are refused)")
	fl.Int64Var(&f.maxBody, "max-body", server.DefaultMaxBody, "bytes of a request body at most")
	fl.IntVar(&f.maxRequests, "max-requests", 0, "requests in progress at most, past which 429 (0: the engine's queue alone bounds them)")
	fl.DurationVar(&f.requestTimeout, "request-timeout", server.DefaultRequestTimeout, "time a process request may take (504 past it)")
	fl.DurationVar(&f.delay, "delay", engine.DefaultDelay, "how long an image waits at most for other requests' images to fill its device batch")
	fl.BoolVar(&f.insecure, "insecure", false, "listen on a host other than loopback without a token")
	fl.BoolVar(&f.allowBuckets, "allow-buckets", false, "let jobs read and write buckets (s3://, gs://, azblob://) with the server's credentials")
	fl.BoolVar(&f.allowKernels, "allow-kernels", false, "let jobs run the kernel stage (CUDA source from a file under --allow-root)")
	cmd.AddCommand(newServeSignCmd(stdout))
	return cmd
}

// config checks the flags and reads the secrets into the server's settings; every
// error is a usage error, since nothing has started.
func (f *serveFlags) config() (server.Config, error) {
	c := server.Config{AllowRoots: f.allowRoots, AllowBuckets: f.allowBuckets, AllowKernels: f.allowKernels,
		MaxBody: f.maxBody, MaxRequests: f.maxRequests, RequestTimeout: f.requestTimeout}
	if f.maxBody < 0 || f.maxRequests < 0 || f.requestTimeout < 0 || f.delay < 0 {
		return c, usageError("--max-body, --max-requests, --request-timeout and --delay may not be negative")
	}
	host, _, err := net.SplitHostPort(f.listen)
	if err != nil {
		return c, usageError("--listen %q: %v (want host:port, such as %s)", f.listen, err, server.DefaultListen)
	}
	key, err := readSecret("--sign-key-file", f.signKeyFile)
	if err != nil {
		return c, err
	}
	c.SignKey = []byte(key)
	if c.Token, err = token(f.tokenFile); err != nil {
		return c, err
	}
	if ip := net.ParseIP(host); c.Token == "" && !f.insecure && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return c, usageError("--listen %s: other machines could reach it, and no token is set: give --token-file (or $IMGPIPE_TOKEN), or --insecure", f.listen)
	}
	return c, nil
}

// runServe serves until ctx ends (SIGINT, SIGTERM), then drains: new work is refused
// (503) while the jobs and requests in progress finish, then the listener closes and the
// engine with it.
func runServe(cmd *cobra.Command, f *serveFlags, stderr io.Writer) error {
	cfg, err := f.config()
	exec := pipeline.DefaultExecution()
	if errs := setFlags(cmd, &exec); err == nil && len(errs) > 0 {
		err = &exitError{code: exitUsage, err: pipeline.ErrorList(errs)}
	}
	if err != nil {
		return err
	}
	cfg.Notice = func(msg string) { fmt.Fprintf(stderr, "imgpipe: %s\n", msg) }
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fatalError("%v", err)
	}
	defer ln.Close() // Serve closes it too; this is for the failures before it
	eng, err := engine.Open(engine.Config{Exec: exec, GPUs: gpus(true, ""), Delay: f.delay, Notice: cfg.Notice})
	if err != nil {
		if _, ours := exitCode(err); !ours {
			err = &exitError{code: exitFatal, err: err}
		}
		return err
	}
	srv, err := server.New(eng, cfg)
	if err != nil {
		return errors.Join(usageError("%v", err), eng.Close())
	}
	// A client gets as long for its headers as a request may run; slower ones are
	// holding a connection open, not sending.
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: cmp.Or(cfg.RequestTimeout, server.DefaultRequestTimeout), ErrorLog: log.New(stderr, "imgpipe: ", 0)}
	fmt.Fprintf(stderr, "imgpipe: serving on http://%s (device %s)\n", ln.Addr(), eng.Device())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case <-cmd.Context().Done():
		fmt.Fprintln(stderr, "imgpipe: stopping: finishing the requests and jobs in progress (Ctrl-C again to abort)")
	case err = <-served: // only a failure of the listener ends Serve before Shutdown
	}
	bg := context.Background() // the drain is bounded by the requests' own limits, or a second signal
	if err = errors.Join(err, srv.Shutdown(bg), hs.Shutdown(bg), eng.Close()); err != nil {
		return fatalError("%v", err)
	}
	return nil
}

func newServeSignCmd(stdout io.Writer) *cobra.Command {
	var keyFile string
	cmd := withHelp("serve-sign", &cobra.Command{
		Use:   "sign --sign-key-file FILE SPEC",
		Short: "Print the signed URL path of a process request for a chain",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := readSecret("--sign-key-file", keyFile)
			if err != nil || key == "" {
				return errors.Join(err, usageError("serve sign needs --sign-key-file"))
			}
			if _, err := pipeline.CompileSpec(args[0]); err != nil {
				printSpecErrors(cmd.ErrOrStderr(), args[0], err)
				return reported{code: exitUsage}
			}
			fmt.Fprintf(stdout, "/v1/process?p=%s&sig=%s\n", url.QueryEscape(args[0]), server.Sign([]byte(key), args[0]))
			return nil
		},
	})
	cmd.Flags().StringVar(&keyFile, "sign-key-file", "", "file holding the key, as serve's --sign-key-file")
	return cmd
}

// readSecret reads a token or key from the file flag names ("" for none), without its
// trailing newline; secrets come from files or the environment, never from arguments,
// which every user of the machine can read (ps).
func readSecret(flag, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", usageError("%s: %v", flag, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", usageError("%s %s: the file is empty", flag, path)
	}
	return s, nil
}

// token is the bearer token of serve and run --server: --token-file's, else $IMGPIPE_TOKEN.
func token(file string) (string, error) {
	if file == "" {
		return os.Getenv("IMGPIPE_TOKEN"), nil
	}
	return readSecret("--token-file", file)
}
