package stages

import (
	"fmt"
	"math/rand"
	"testing"
)

// withVector runs f with the vector kernels on or off (tests of this
// package do not run in parallel, so switching the variable is safe).
func withVector(t *testing.T, on bool, f func(t *testing.T)) {
	t.Helper()
	if on && !hasVector() {
		t.Skip("no vector kernels on this CPU")
	}
	old := useVector
	useVector = on
	defer func() { useVector = old }()
	f(t)
}

// TestBlurBothPaths: the portable loops and the vector sweeps both give the
// definition's bits, on every shape of the shared table (odd widths leave
// tails after the groups of eight).
func TestBlurBothPaths(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("vector=", on), func(t *testing.T) {
			withVector(t, on, func(t *testing.T) {
				for _, sigma := range []float64{0.3, 1.5, 4.2} {
					taps := BlurTaps(sigma)
					forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
						src := randImage(rng, s.w, s.h, c, s.pad)
						dst := newPadded(s.w, s.h, c, s.pad+1)
						Blur(dst, src, taps)
						sameImage(t, dst, refBlur(src, taps))
						checkPadding(t, dst)
					})
				}
			})
		})
	}
}

// TestBlurSweeps checks the sweeps element by element against the plain
// formulas at every length from 0 to 41 (all tails) and the largest values.
func TestBlurSweeps(t *testing.T) {
	withVector(t, true, func(t *testing.T) {
		rng := rand.New(rand.NewSource(2))
		for n := 0; n <= 41; n++ {
			a8, b8 := make([]uint8, n), make([]uint8, n)
			a16, b16 := make([]uint16, n), make([]uint16, n)
			for i := range n {
				a8[i], b8[i] = uint8(rng.Intn(256)), uint8(rng.Intn(256))
				a16[i], b16[i] = uint16(rng.Intn(65281)), uint16(rng.Intn(65281))
				if i == n-1 {
					a8[i], b8[i], a16[i], b16[i] = 255, 255, 65280, 65280
				}
			}
			const w0, w = 9000, 3000
			acc8, acc16 := make([]uint32, n), make([]uint32, n)
			mulLine(acc8, a8, w0)
			addPair(acc8, a8, b8, w)
			mulLine(acc16, a16, w0)
			addPair(acc16, a16, b16, w)
			for i := range n {
				if want := w0*uint32(a8[i]) + w*(uint32(a8[i])+uint32(b8[i])); acc8[i] != want {
					t.Fatalf("n=%d: uint8 element %d = %d, want %d", n, i, acc8[i], want)
				}
				if want := w0*uint32(a16[i]) + w*(uint32(a16[i])+uint32(b16[i])); acc16[i] != want {
					t.Fatalf("n=%d: uint16 element %d = %d, want %d", n, i, acc16[i], want)
				}
			}
		}
	})
}

// TestGrayscaleBothPaths: the portable loop and the vector kernel give the
// formula's bits on every shape (widths around 16 leave tails); the
// exhaustive TestGrayscaleAllColours runs whichever this CPU uses.
func TestGrayscaleBothPaths(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("vector=", on), func(t *testing.T) {
			withVector(t, on, func(t *testing.T) {
				forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
					for _, w := range []int{s.w, 15, 16, 17, 33} {
						src := randImage(rng, w, s.h, c, s.pad)
						dst := newPadded(w, s.h, 1, s.pad+1)
						Grayscale(dst, src)
						sameImage(t, dst, refGray(src))
						checkPadding(t, dst)
					}
				})
			})
		})
	}
}
