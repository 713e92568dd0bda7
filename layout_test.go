// Package imgpipe_test states the layout rules of the module (which package may import
// which, who owns the run lifecycle, how large a file or a function may grow), so that they
// stay true. It reads the source tree with go/build and go/parser, without the go command,
// so it also runs where only a test binary is (the GPU machine).
package imgpipe_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	module = "github.com/imgpipe/imgpipe"
	// lifecycle is the package that owns a run into a folder: its lock and its journal.
	lifecycle = "pipeline/folderrun"
	// maxFileLines and maxFuncLines bound a non-test file anywhere and a function of the CLI.
	maxFileLines = 600
	maxFuncLines = 80
	maxCLILines  = 2350
)

// pkg is one package of the module, as its non-test files for this platform make it.
type pkg struct {
	dir   string
	files []string // non-test Go files, full paths
	tests []string // test Go files, full paths
	deps  []string // module-internal imports, relative to the module ("pipeline/job")
}

// loadModule reads every package of the module below the current folder (the module root).
func loadModule(t *testing.T) map[string]*pkg {
	t.Helper()
	pkgs := map[string]*pkg{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
			return filepath.SkipDir
		}
		bp, err := build.Default.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		p := &pkg{dir: path}
		for _, f := range bp.GoFiles {
			p.files = append(p.files, filepath.Join(path, f))
		}
		for _, f := range append(bp.TestGoFiles, bp.XTestGoFiles...) {
			p.tests = append(p.tests, filepath.Join(path, f))
		}
		for _, imp := range bp.Imports {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				p.deps = append(p.deps, rel)
			}
		}
		pkgs[filepath.ToSlash(path)] = p
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 || pkgs["pipeline"] == nil {
		t.Fatalf("read %d packages, no pipeline among them: run from the module root", len(pkgs))
	}
	return pkgs
}

// closure is every module-internal package root depends on, root excluded.
func closure(pkgs map[string]*pkg, root string) []string {
	seen := map[string]bool{root: true}
	todo := []string{root}
	var out []string
	for len(todo) > 0 {
		p := pkgs[todo[0]]
		todo = todo[1:]
		if p == nil {
			continue
		}
		for _, d := range p.deps {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
				todo = append(todo, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// TestImportRules: the engine core reaches the GPU only through the scheduler's contract
// (its backend seam, Options.Backend, is where package pipeline/gpu plugs in), and the GPU
// packages never reach back into the engine.
func TestImportRules(t *testing.T) {
	pkgs := loadModule(t)
	for _, dep := range closure(pkgs, "pipeline") {
		if under(dep, "cudastage") && dep != "cudastage/sched" {
			t.Errorf("pipeline depends on %s: the engine core may reach the GPU only through cudastage/sched", dep)
		}
	}
	for _, dep := range pkgs["pipeline"].deps {
		if under(dep, "memory") || under(dep, "pipeline") {
			t.Errorf("pipeline imports %s: memory pools and its own subpackages (the GPU backend among them) stay behind the seam", dep)
		}
	}
	for path, p := range pkgs {
		if !under(path, "cudastage") {
			continue
		}
		for _, dep := range p.deps {
			if under(dep, "pipeline") {
				t.Errorf("%s imports %s: nothing under cudastage/ imports the engine", path, dep)
			}
		}
	}
}

// TestLifecycleOwnsLockAndJournal: the folder lock and the report journal, two of the
// guarantees of a run, are written in one package, so that every caller gets them; no
// other Go file, tests included, takes the flock or spells their names.
func TestLifecycleOwnsLockAndJournal(t *testing.T) {
	pkgs := loadModule(t)
	if pkgs[lifecycle] == nil {
		t.Fatalf("no package %s", lifecycle)
	}
	words := []string{"Flock", `.journal"`, `".imgpipe-run"`}
	for path, p := range pkgs {
		if path == lifecycle {
			continue
		}
		for _, f := range append(p.files, p.tests...) {
			if f == "layout_test.go" {
				continue // this file names them to look for them
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range words {
				if strings.Contains(string(b), w) {
					t.Errorf("%s names %s: the lock and the journal belong to %s", f, w, lifecycle)
				}
			}
		}
	}
}

// TestSizes: no non-test file over maxFileLines; the CLI is flags, help, printing and exit
// codes, so it stays under maxCLILines with no function over maxFuncLines.
func TestSizes(t *testing.T) {
	pkgs := loadModule(t)
	fset := token.NewFileSet()
	for path, p := range pkgs {
		total := 0
		for _, f := range p.files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n := strings.Count(string(b), "\n")
			total += n
			if n > maxFileLines {
				t.Errorf("%s: %d lines, over %d", f, n, maxFileLines)
			}
			if path != "cmd/imgpipe" {
				continue
			}
			af, err := parser.ParseFile(fset, f, b, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
						t.Errorf("%s: func %s is %d lines, over %d", f, fd.Name.Name, n, maxFuncLines)
					}
				}
			}
		}
		if path == "cmd/imgpipe" && total > maxCLILines {
			t.Errorf("cmd/imgpipe: %d lines of non-test Go, over %d", total, maxCLILines)
		}
	}
}
