package nvrtc

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unsafe"
)

// Limits checked before NVRTC sees anything.
const (
	// MaxSourceBytes bounds one program's source text.
	MaxSourceBytes = 1 << 20
	// MaxLogBytes bounds the compile log kept in a CompileError.
	MaxLogBytes = 64 << 10
)

// Request is one program to compile.
type Request struct {
	// Name is the source's file name as errors show it ("invert.cu").
	Name string
	// Source is the CUDA C++ text.
	Source string
	// Arch is the target GPU's compute capability as 10·major+minor (90 for
	// an H100): NVRTC is run with --gpu-architecture=sm_<Arch> and returns
	// CUBIN for exactly that GPU.
	Arch int
	// Flags are further NVRTC options ("-DRADIUS=2", "--use_fast_math").
	Flags []string
}

// Options returns every option NVRTC is given for r, the architecture first.
func (r Request) Options() []string {
	return append([]string{fmt.Sprintf("--gpu-architecture=sm_%d", r.Arch)}, r.Flags...)
}

// check validates r before anything is loaded or allocated.
func (r Request) check() error {
	switch {
	case r.Name == "" || strings.ContainsAny(r.Name, "\x00\n"):
		return fmt.Errorf("nvrtc: program name %q: want a file name", r.Name)
	case r.Source == "":
		return fmt.Errorf("nvrtc: %s: empty source", r.Name)
	case len(r.Source) > MaxSourceBytes:
		return fmt.Errorf("nvrtc: %s: source is %d bytes, at most %d", r.Name, len(r.Source), MaxSourceBytes)
	case strings.IndexByte(r.Source, 0) >= 0:
		return fmt.Errorf("nvrtc: %s: source holds a NUL byte", r.Name)
	case r.Arch < 10 || r.Arch > 999:
		return fmt.Errorf("nvrtc: %s: architecture %d: want 10·major+minor, such as 90", r.Name, r.Arch)
	}
	for _, f := range r.Flags {
		if f == "" || strings.IndexByte(f, 0) >= 0 {
			return fmt.Errorf("nvrtc: %s: bad option %q", r.Name, f)
		}
		if strings.HasPrefix(f, "--gpu-architecture") || strings.HasPrefix(f, "-arch") {
			return fmt.Errorf("nvrtc: %s: option %q: the architecture comes from the device", r.Name, f)
		}
	}
	return nil
}

// CompileError is a program NVRTC refused: the first error's position, and
// NVRTC's whole log.
type CompileError struct {
	File      string // the program's name
	Line, Col int    // 1-based; Col is 0 when the log shows no caret
	Msg       string // the first error's text
	Log       string // NVRTC's log, at most MaxLogBytes
}

// Error gives file:line:col: message, then the log.
func (e *CompileError) Error() string {
	pos := e.File
	if e.Line > 0 {
		pos += ":" + strconv.Itoa(e.Line)
		if e.Col > 0 {
			pos += ":" + strconv.Itoa(e.Col)
		}
	}
	return fmt.Sprintf("%s: %s\nNVRTC log:\n%s", pos, e.Msg, strings.TrimRight(e.Log, "\n"))
}

// diagLine matches NVRTC's diagnostics: `name(line): error: text`.
var diagLine = regexp.MustCompile(`^(.*)\((\d+)\): (?:catastrophic )?error( [^:]*)?: (.*)$`)

// parseLog turns NVRTC's log into a CompileError positioned at the first
// error. NVRTC prints the offending source line under the diagnostic and a
// caret under the column; the column is the caret's (1-based), corrected by
// the indent NVRTC adds to the echoed line when source has that line (NVRTC
// 13 indents it by two more columns than the source).
func parseLog(name, log, source string) *CompileError {
	if len(log) > MaxLogBytes {
		log = log[:MaxLogBytes] + "\n[log truncated]"
	}
	e := &CompileError{File: name, Msg: "compilation failed", Log: log}
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		m := diagLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		e.File, e.Msg = m[1], m[4]
		e.Line, _ = strconv.Atoi(m[2])
		if i+2 < len(lines) {
			if c := strings.TrimRight(lines[i+2], " \r"); strings.HasSuffix(c, "^") && strings.Trim(c, " ^") == "" {
				e.Col = len(c) - echoIndent(lines[i+1], source, e.Line)
			}
		}
		break
	}
	return e
}

// echoIndent is how many columns further right NVRTC echoed source line n
// than it stands in source (0 when it cannot tell).
func echoIndent(echo, source string, n int) int {
	src := strings.Split(source, "\n")
	if n < 1 || n > len(src) {
		return 0
	}
	text := strings.TrimSpace(src[n-1])
	at, in := strings.Index(echo, text), strings.Index(src[n-1], text)
	if text == "" || at < 0 || at < in {
		return 0
	}
	return at - in
}

// compile runs NVRTC on r, which must have passed check, and returns the
// CUBIN.
func (l *library) compile(r Request) ([]byte, error) {
	if err := l.checkArch(r.Arch); err != nil {
		return nil, err
	}
	src, name := cstr(r.Source), cstr(r.Name)
	var prog uintptr
	if err := l.call("nvrtcCreateProgram", l.createProgram, uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(&src[0])), uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
		return nil, err
	}
	defer l.call("nvrtcDestroyProgram", l.destroyProgram, uintptr(unsafe.Pointer(&prog))) //nolint:errcheck // nothing to do about it

	opts := r.Options()
	bufs := make([][]byte, len(opts))
	ptrs := make([]*byte, len(opts))
	for i, o := range opts {
		bufs[i] = cstr(o)
		ptrs[i] = &bufs[i][0]
	}
	err := l.call("nvrtcCompileProgram", l.compileProgram, prog, uintptr(len(ptrs)), uintptr(unsafe.Pointer(&ptrs[0])))
	var ne *Error
	if errors.As(err, &ne) && ne.Code == codeCompilation {
		log, lerr := l.log(prog)
		if lerr != nil {
			return nil, fmt.Errorf("%s: %w (and reading the log: %v)", r.Name, err, lerr)
		}
		return nil, parseLog(r.Name, log, r.Source)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Name, err)
	}
	var n uintptr
	if err := l.call("nvrtcGetCUBINSize", l.getCUBINSize, prog, uintptr(unsafe.Pointer(&n))); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("nvrtc: %s: compiled to an empty CUBIN", r.Name)
	}
	cubin := make([]byte, n)
	if err := l.call("nvrtcGetCUBIN", l.getCUBIN, prog, uintptr(unsafe.Pointer(&cubin[0]))); err != nil {
		return nil, err
	}
	return cubin, nil
}

// log returns the program's compile log.
func (l *library) log(prog uintptr) (string, error) {
	var n uintptr
	if err := l.call("nvrtcGetProgramLogSize", l.getProgramLogSize, prog, uintptr(unsafe.Pointer(&n))); err != nil {
		return "", err
	}
	if n <= 1 {
		return "", nil
	}
	b := make([]byte, n)
	if err := l.call("nvrtcGetProgramLog", l.getProgramLog, prog, uintptr(unsafe.Pointer(&b[0]))); err != nil {
		return "", err
	}
	return strings.TrimRight(string(b[:n-1]), "\x00"), nil
}

// checkArch refuses an architecture this NVRTC cannot target, naming the
// ones it can.
func (l *library) checkArch(arch int) error {
	archs, err := l.supportedArchs()
	if err != nil {
		return err
	}
	for _, a := range archs {
		if a == arch {
			return nil
		}
	}
	return fmt.Errorf("nvrtc: NVRTC %d.%d (%s) cannot compile for sm_%d; it knows %v: install a newer NVRTC or set %s",
		l.major, l.minor, l.path, arch, archs, Spec.Env)
}

// cstr returns s as a NUL-terminated byte slice.
func cstr(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}
