package stages

import "fmt"

// mustBe panics unless m is a consistent w×h image with c channels. The
// stage functions use it on their arguments: the planner checks shapes before
// anything runs, so a mismatch here is a bug in the caller, not bad input.
func mustBe(op, which string, m *Image, w, h, c int) {
	if m == nil {
		panic(fmt.Sprintf("stages.%s: %s image is nil", op, which))
	}
	if err := m.Check(); err != nil {
		panic(fmt.Sprintf("stages.%s: %s: %v", op, which, err))
	}
	if m.W != w || m.H != h || m.C != c {
		panic(fmt.Sprintf("stages.%s: %s image is %dx%dx%d, want %dx%dx%d", op, which, m.W, m.H, m.C, w, h, c))
	}
}

// mustValid panics unless m is a consistent image.
func mustValid(op, which string, m *Image) {
	if m == nil {
		panic(fmt.Sprintf("stages.%s: %s image is nil", op, which))
	}
	if err := m.Check(); err != nil {
		panic(fmt.Sprintf("stages.%s: %s: %v", op, which, err))
	}
}
