package cu

import (
	"os"
	"testing"
)

var tempDirs []string

// mkdirTemp makes a directory for the fake library that outlives single
// tests (it is built once per test binary); TestMain removes it.
func mkdirTemp() (string, error) {
	d, err := os.MkdirTemp("", "fakecuda")
	if err == nil {
		tempDirs = append(tempDirs, d)
	}
	return d, err
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}
