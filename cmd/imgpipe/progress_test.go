package main

import "testing"

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a/b.jpg", "a/b.jpg"},
		{"été/ß.png", "été/ß.png"},
		{"evil\x1b[2J.png", `"evil\x1b[2J.png"`},
		{"two\nlines.jpg", `"two\nlines.jpg"`},
	}
	for _, tt := range tests {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
