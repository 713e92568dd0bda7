package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Pos is where something was written: a column of a spec, or file:line:col of a YAML job.
// Lines and columns count from 1; zero means unknown.
type Pos struct {
	File      string
	Line, Col int
}

// String formats the position as "file:line:col", "line:col" or "col N".
func (p Pos) String() string {
	switch {
	case p.Line > 0 && p.Col == 0 && p.File != "":
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	case p.Line > 0 && p.File != "":
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	case p.Line > 0:
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	case p.File != "" && p.Col > 0:
		return fmt.Sprintf("%s: col %d", p.File, p.Col)
	case p.File != "":
		return p.File
	case p.Col > 0:
		return fmt.Sprintf("col %d", p.Col)
	}
	return ""
}

// PosError is an error at a position in a spec or job file.
type PosError struct {
	Pos Pos
	Err error
}

// Error formats the error as "pos: message".
func (e *PosError) Error() string {
	if s := e.Pos.String(); s != "" {
		return s + ": " + e.Err.Error()
	}
	return e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *PosError) Unwrap() error { return e.Err }

// inOrder sorts errs by where they were written (line, then column) so that a user reads
// them in the order of the text; equal positions keep their order, and errors without a
// position go last.
func inOrder(errs []error) {
	key := func(e error) (int, int) {
		var pe *PosError
		if !errors.As(e, &pe) || pe.Pos.Line == 0 && pe.Pos.Col == 0 {
			return math.MaxInt, 0
		}
		return pe.Pos.Line, pe.Pos.Col
	}
	slices.SortStableFunc(errs, func(a, b error) int {
		la, ca := key(a)
		lb, cb := key(b)
		return cmp.Or(cmp.Compare(la, lb), cmp.Compare(ca, cb))
	})
}

func errorAt(pos Pos, format string, args ...any) *PosError {
	return &PosError{Pos: pos, Err: fmt.Errorf(format, args...)}
}

// ErrorList is every problem found in one check, so that a user fixes them all in one go.
// Its Error method puts one problem per line.
type ErrorList []error

// Error joins the problems, one per line.
func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap returns the problems, so errors.Is and errors.As look into each.
func (l ErrorList) Unwrap() []error { return l }

// joinErrors returns nil for no errors and an ErrorList otherwise, flattening nested lists.
func joinErrors(errs []error) error {
	var out ErrorList
	for _, e := range errs {
		if l, ok := e.(ErrorList); ok {
			out = append(out, l...)
		} else if e != nil {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Errors returns the individual problems inside err: the elements of an ErrorList, or err
// itself. It lets callers print one problem per line.
func Errors(err error) []error {
	if err == nil {
		return nil
	}
	var l ErrorList
	if errors.As(err, &l) {
		return l
	}
	return []error{err}
}

// Nearest returns the candidate closest to s by edit distance (s compared without case), if
// it is close enough to be a plausible typo, and "" otherwise. It gives the "did you mean"
// of every unknown-name error, so loaders built on the registry suggest names the same way.
// Close enough is one edit per three letters, at least one: "pgn" suggests png, "gif" (two
// edits from tiff) suggests nothing.
func Nearest(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(1, len(s)/3)
	if best == "" || bestD > limit || bestD >= len(best) {
		return ""
	}
	return best
}

// editDistance is the number of insertions, deletions, substitutions and swaps of two
// neighbouring bytes that turn a into b (the optimal string alignment distance): a swap,
// the commonest typo ("pgn"), counts one.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		// Names are short; a long word is not a typo of one, and this bounds the work.
		return len(a) + len(b)
	}
	prev2 := make([]int, len(b)+1) // row i-2, for swaps
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
