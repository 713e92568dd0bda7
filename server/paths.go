package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/kernelstage"
)

// kernelFile is the kernel stage's parameter that names a file on the server.
const kernelFile = "src"

// checkRequestStages refuses, in a process request, what would reach the server's files
// or run the request's code: the kernel stage unless AllowKernels, and its src= always.
func (s *Server) checkRequestStages(steps []pipeline.Step) error {
	return s.checkStages(steps, func(step pipeline.Step, src string) error {
		return statusErr(http.StatusForbidden, fmt.Errorf("%s: %s %s=%s names a file on the server, which a request may not; send the kernel inline (source=)",
			step.Pos, kernelstage.Name, kernelFile, src))
	})
}

// checkStages refuses the kernel stage unless AllowKernels, and hands each kernel file to
// file.
func (s *Server) checkStages(steps []pipeline.Step, file func(step pipeline.Step, src string) error) error {
	for _, step := range steps {
		if step.Def == nil || step.Err != nil || step.Def.Name != kernelstage.Name {
			continue
		}
		if !s.cfg.AllowKernels {
			return statusErr(http.StatusForbidden, fmt.Errorf("%s: the %s stage runs the request's own code on the server's GPU, which this server does not allow",
				step.Pos, kernelstage.Name))
		}
		if src := step.Params.Str(kernelFile); src != "" {
			if err := file(step, src); err != nil {
				return err
			}
		}
	}
	return nil
}

// jobRegistry is pipeline.Builtin with the kernel stage's bindings wrapped: before the
// stage reads its file, the wrapper refuses the stage unless AllowKernels and a file that is
// not an absolute path under the roots.
func (s *Server) jobRegistry() (*pipeline.Registry, error) {
	defs := pipeline.Builtin.Stages()
	for i, d := range defs {
		if d.Name != kernelstage.Name {
			continue
		}
		k := *d
		k.GPU, k.ArrayGPU = s.checkedKernel(d.GPU), s.checkedKernel(d.ArrayGPU)
		defs[i] = &k
	}
	return pipeline.NewRegistry(defs...)
}

// checkedKernel is a kernel binding that checks the stage's use first (see jobRegistry).
func (s *Server) checkedKernel(bind func(pipeline.Params) (sched.LaunchArgs, error)) func(pipeline.Params) (sched.LaunchArgs, error) {
	return func(p pipeline.Params) (sched.LaunchArgs, error) {
		if !s.cfg.AllowKernels {
			return nil, errors.New("it runs the job's own code on the server's GPU, which this server does not allow")
		}
		if src := p.Str(kernelFile); src != "" {
			if !filepath.IsAbs(src) {
				return nil, fmt.Errorf("%s=%s: give the kernel file's absolute path, under --allow-root", kernelFile, src)
			}
			if _, err := s.confinePath(kernelFile, src); err != nil {
				return nil, err
			}
		}
		return bind(p)
	}
}

// confine returns where loc (a job's path or bucket URL, what names it) lies as the job
// must use it: a path resolved against the first root when relative, its links resolved,
// under one of the roots; a bucket URL only with AllowBuckets, and a file:// one under the
// roots too. Anything else is a 403.
func (s *Server) confine(what, loc string) (string, error) {
	if blobio.IsURL(loc) {
		if !s.cfg.AllowBuckets {
			return "", statusErr(http.StatusForbidden, fmt.Errorf("%s %s: this server does not use buckets (--allow-buckets)", what, loc))
		}
		u, err := url.Parse(loc)
		if err != nil || u.Scheme != "file" {
			return loc, nil // the bucket's own driver says what is wrong with it
		}
		if u.RawQuery != "" {
			return "", statusErr(http.StatusForbidden, fmt.Errorf("%s %s: a file:// bucket takes no options here", what, loc))
		}
		if _, err := s.confinePath(what, filepath.FromSlash(u.Path)); err != nil {
			return "", err
		}
		return loc, nil
	}
	return s.confinePath(what, loc)
}

// confinePath is confine for a local path.
func (s *Server) confinePath(what, p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.roots[0], p)
	}
	real, err := resolveExisting(filepath.Clean(p))
	if err != nil {
		return "", statusErr(http.StatusForbidden, fmt.Errorf("%s %s: %v", what, p, err))
	}
	for _, root := range s.roots {
		if rel, err := filepath.Rel(root, real); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return real, nil
		}
	}
	return "", statusErr(http.StatusForbidden, fmt.Errorf("%s %s lies outside the folders this server may use (--allow-root %s)",
		what, p, strings.Join(s.roots, ", ")))
}

// resolveExisting resolves the links of the longest part of p that exists, keeping the
// rest (what a run will create) as written; p is absolute and clean.
func resolveExisting(p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err == nil {
		return real, nil
	}
	parent := filepath.Dir(p)
	if !errors.Is(err, fs.ErrNotExist) || parent == p {
		return "", err
	}
	if _, lerr := os.Lstat(p); lerr == nil {
		return "", err // a dangling link: where it would lead is not known
	}
	dir, err := resolveExisting(parent)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(p)), nil
}
