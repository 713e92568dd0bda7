package folderrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/fsguard"
	"github.com/imgpipe/imgpipe/pipeline"
)

// CheckPaths checks the request's input, its output against it, and the report and trace
// paths, as Prepare does, opening nothing; each mistake is a *RequestError:
//   - the output folder is the input folder, or the input folder lies inside the output
//     folder: outputs would land among the inputs and could overwrite them;
//   - the output folder lies inside the input folder and holds files imgpipe did not make
//     (it is not empty and has no imgpipe report): the walk skips it, so those images would
//     be silently left out, and outputs of same-named inputs could overwrite them;
//   - the report or the trace could clobber something (see checkWriteTargets), or
//     resume has no report file to read (a report on standard output).
func CheckPaths(r Request) error {
	if err := namedOutput(&r); err != nil {
		return err
	}
	if err := checkBuckets(&r); err != nil {
		return err
	}
	// A file:// bucket is a folder: it gets a folder's checks, its report object included.
	if dir, ok := blobio.LocalDir(r.Input); ok {
		r.Input = dir
	}
	if dir, ok := blobio.LocalDir(r.Output); ok {
		if r.Report == "" {
			r.Report = filepath.Join(dir, ReportName)
		}
		r.Output = dir
	}
	// fi is the input folder's; nil for a single file or a list on stdin, which are not
	// walked (a list is checked once read, by checkListed).
	var fi os.FileInfo
	if r.Input != StdinInput && !blobio.IsURL(r.Input) { // a bucket is found when it is opened
		var err error
		if fi, err = os.Stat(r.Input); err != nil {
			return badf("%sinput folder: %v", r.at("input.dir"), err)
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			return badf("%sinput %s is neither a folder nor a file", r.at("input.dir"), r.Input)
		}
		if !fi.IsDir() {
			fi = nil
		}
	}
	if err := checkOutput(&r, fi); err != nil {
		return err
	}
	if err := checkWrites(&r); err != nil {
		return err
	}
	if r.ReportPath() == StdoutPath && r.Exec.Resume {
		return badf("%s--resume reads the previous report, which --report - does not keep; name a report file", r.at("output.report"))
	}
	if tr := r.Exec.Trace; tr != "" && tr != StdoutPath {
		if fi, err := os.Stat(filepath.Dir(tr)); err != nil || !fi.IsDir() {
			return badf("%s--trace %s: its folder %s does not exist", r.at("execution.trace"), tr, filepath.Dir(tr))
		}
	}
	return checkWriteTargets(&r, fi)
}

// checkWrites refuses what would silently do nothing: -0 without a list on stdin, and an
// output folder for a chain that would write nothing into it (no save stage, and nothing
// but statuses in its report; a report-only chain's folder holds its report).
func checkWrites(r *Request) error {
	switch {
	case r.NullList && r.Input != StdinInput:
		return badf("-0/--null reads a NUL-separated list of paths on stdin: it needs -i -")
	case r.Report == NoReport && r.Exec.Resume:
		return badf("%s--resume reads the previous report, which --report none does not write", r.at("output.report"))
	case r.Report == NoReport && r.Plan != nil && r.Plan.Save == nil:
		return badf("%s--report none with a chain that saves nothing would write nothing at all", r.at("output.report"))
	case r.Name != "" && r.Plan != nil && r.Plan.Save == nil:
		return badf("--name names saved outputs, and the chain %q has no save stage", r.Plan)
	case r.Plan != nil && r.Plan.Save == nil && r.Output != "" && !r.Plan.ReportOnly():
		return badf("%sthe chain %q has no save stage, so nothing would be written into the output folder %s: end it with save, or drop -o and name --report FILE to only check the inputs",
			r.at("output.dir"), r.Plan, r.Output)
	}
	return nil
}

// namedOutput turns an Output that names the one output file of a single-file input (its
// extension is the save format's) into its folder and a Name; it checks Name.
func namedOutput(r *Request) error {
	if r.named || r.Plan == nil || r.Plan.Save == nil || filepath.Ext(r.Output) == "" || blobio.IsURL(r.Output) || blobio.IsURL(r.Input) || r.Input == StdinInput {
		return checkName(r)
	}
	if fi, err := os.Stat(r.Input); err != nil || fi.IsDir() {
		return checkName(r)
	}
	if fi, err := os.Stat(r.Output); err == nil && fi.IsDir() {
		return checkName(r)
	}
	base, ext := filepath.Base(r.Output), r.Plan.Save.Ext
	stem, ok := strings.CutSuffix(base, "."+ext)
	switch {
	case !ok:
		return badf("%s-o %s names one output file, and the chain saves .%s files: name it %s.%s, or set save format= to its format",
			r.at("output.dir"), r.Output, ext, strings.TrimSuffix(base, filepath.Ext(base)), ext)
	case samePath(r.Output, r.Input):
		return badf("%s-o %s is the input file; name another", r.at("output.dir"), r.Output)
	case r.Name != "":
		return badf("-o %s names the one output file; --name names outputs in a folder: give one of them", r.Output)
	}
	r.Output, r.Name, r.named = filepath.Dir(r.Output), stem+"."+pipeline.NameExt, true
	return nil
}

// checkName checks the --name template.
func checkName(r *Request) error {
	if r.Name == "" || r.named {
		return nil
	}
	if err := pipeline.CheckNameTemplate(r.Name); err != nil {
		return badf("--name: %v", err)
	}
	return nil
}

// checkOutput checks a local output folder against the input folder (fi, nil when the
// input is not a folder); see CheckPaths.
func checkOutput(r *Request, fi os.FileInfo) error {
	// A named output file (namedOutput) is not the input: its folder may hold the input.
	if r.Output == "" || r.Input == StdinInput || blobio.IsURL(r.Output) || r.named {
		return nil
	}
	fo, err := os.Stat(r.Output)
	if err != nil {
		fo = nil // not there yet: MkdirAll makes it, or says why it cannot
	}
	switch {
	case fo != nil && fi != nil && os.SameFile(fi, fo):
		return badf("%sthe output folder is the input folder; choose another (it may lie inside the input folder)", r.at("output.dir"))
	case fo != nil && !fo.IsDir():
		return badf("%soutput folder %s is not a folder", r.at("output.dir"), r.Output)
	case within(r.Input, r.Output, fo):
		return badf("%sthe input folder %s lies inside the output folder %s, where outputs could overwrite inputs; choose an output folder outside the input folder",
			r.at("output.dir"), r.Input, r.Output)
	case fo != nil && fi != nil && within(r.Output, r.Input, fi):
		if err := checkNestedOutput(r.Output); err != nil {
			return badf("%s%v", r.at("output.dir"), err)
		}
	}
	return nil
}

// checkNestedOutput accepts an existing output folder that lies inside the input folder
// only when imgpipe made it: it is empty or holds an imgpipe report.
func checkNestedOutput(out string) error {
	ents, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("output folder: %v", err)
	}
	if len(ents) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(out, ReportName)); err == nil {
		return nil
	}
	return fmt.Errorf("the output folder %s lies inside the input folder and already holds files but no %s, so imgpipe did not make it: "+
		"images in it would not be processed (the walk skips the output folder) and outputs of the same names could overwrite them; "+
		"choose a new or empty output folder, or one outside the input folder", out, ReportName)
}

// within reports whether dir is root or lies inside it. With root's FileInfo (root exists)
// it walks up dir's real path (symbolic links resolved) comparing each folder with root by
// identity, so links and different spellings of one folder cannot hide it; otherwise it
// compares the cleaned absolute paths.
func within(dir, root string, rootInfo os.FileInfo) bool {
	if rootInfo != nil {
		p, err := filepath.EvalSymlinks(dir)
		if err == nil {
			p, err = filepath.Abs(p)
		}
		if err == nil {
			for {
				if fi, err := os.Stat(p); err == nil && os.SameFile(fi, rootInfo) {
					return true
				}
				parent := filepath.Dir(p)
				if parent == p {
					return false
				}
				p = parent
			}
		}
	}
	d, err1 := filepath.Abs(dir)
	r, err2 := filepath.Abs(root)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(r, d)
	return err == nil && filepath.IsLocal(rel) || rel == "."
}

// checkWriteTargets checks the files the run writes beside its outputs (the report and the
// trace) so that neither can clobber anything: each is "-" (standard output) or a path that
//   - is not there yet, or is a regular file: never a link (it would be replaced by a
//     file, or lead the write elsewhere), a FIFO (its reader would hang), a device or a
//     folder;
//   - does not lie inside the input folder (it could be an input), unless it also lies
//     inside an output folder nested there, which the walk skips, and is not the input
//     file of a single-file input (the paths of a list on stdin are checked once read,
//     by checkListed);
//   - is not the other one: the trace cannot be the report, nor its journal.
func checkWriteTargets(r *Request, inInfo os.FileInfo) error {
	report, trace := r.ReportPath(), r.Exec.Trace
	targets := []struct{ flag, field, path string }{{"--report", "output.report", report}, {"--trace", "execution.trace", trace}}
	for _, t := range targets {
		if t.path == "" || t.path == StdoutPath || t.path == NoReport && t.flag == "--report" {
			continue
		}
		if err := checkWriteTarget(t.path, r, inInfo); err != nil {
			return badf("%s%s %s: %v", r.at(t.field), t.flag, t.path, err)
		}
	}
	if trace == "" {
		return nil
	}
	if trace == StdoutPath && report == StdoutPath {
		return badf("%s--trace - and --report - would both write to standard output; send one of them to a file", r.at("execution.trace"))
	}
	for _, other := range []string{report, JournalPath(report)} {
		if other != StdoutPath && trace != StdoutPath && samePath(trace, other) {
			return badf("%s--trace %s is the report %s; name another file", r.at("execution.trace"), trace, other)
		}
	}
	return nil
}

// checkWriteTarget checks one report or trace path (see checkWriteTargets).
func checkWriteTarget(p string, r *Request, inInfo os.FileInfo) error {
	if err := fsguard.CheckTarget(p); err != nil {
		return err
	}
	if fi, err := os.Lstat(p); err == nil && inInfo == nil && r.Input != StdinInput {
		if in, err := os.Stat(r.Input); err == nil && os.SameFile(fi, in) {
			return errors.New("is the input file; write it elsewhere")
		}
	}
	dir := filepath.Dir(p)
	if inInfo != nil && within(dir, r.Input, inInfo) {
		outInfo, err := os.Stat(r.Output)
		if err != nil {
			outInfo = nil // not made yet: compared by path
		}
		if r.Output == "" || !within(dir, r.Output, outInfo) {
			return fmt.Errorf("lies inside the input folder %s, where it could replace an input; write it elsewhere", r.Input)
		}
	}
	return nil
}

// samePath reports whether a and b name the same file: the same file when both exist, or
// the same cleaned absolute path.
func samePath(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	aa, errA := filepath.Abs(a)
	ab, errB := filepath.Abs(b)
	return errA == nil && errB == nil && aa == ab
}

// checkBuckets checks what the folder checks cannot look into in a request whose input or
// output is a bucket URL.
func checkBuckets(r *Request) error {
	inURL, outURL := blobio.IsURL(r.Input), blobio.IsURL(r.Output)
	if !inURL && !outURL {
		return nil
	}
	switch {
	case strings.TrimSuffix(r.Input, "/") == strings.TrimSuffix(r.Output, "/"):
		return badf("the output is the input (%s); choose another", r.Input)
	case outURL && r.Report != "" && blobio.IsURL(r.Report):
		return badf("--report %s: a report goes to a local file, or by default into the output bucket", r.Report)
	}
	return nil
}
