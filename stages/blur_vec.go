package stages

// vecLen is the part of n elements the vector sweeps take (whole groups of 8).
func vecLen(n int) int { return n &^ 7 }

// mulLine sets acc[x] = w·c[x].
func mulLine[T uint8 | uint16](acc []uint32, c []T, w uint32) {
	c = c[:len(acc)]
	n := vecLen(len(acc))
	if n > 0 {
		switch c := any(c).(type) {
		case []uint8:
			mulLineU8(&acc[0], &c[0], n, w)
		case []uint16:
			mulLineU16(&acc[0], &c[0], n, w)
		}
	}
	for x := n; x < len(acc); x++ {
		acc[x] = w * uint32(c[x])
	}
}

// addPair adds w·(a[x]+b[x]) to acc[x]: one mirrored pair of taps.
func addPair[T uint8 | uint16](acc []uint32, a, b []T, w uint32) {
	a, b = a[:len(acc)], b[:len(acc)]
	n := vecLen(len(acc))
	if n > 0 {
		switch a := any(a).(type) {
		case []uint8:
			addPairU8(&acc[0], &a[0], &any(b).([]uint8)[0], n, w)
		case []uint16:
			addPairU16(&acc[0], &a[0], &any(b).([]uint16)[0], n, w)
		}
	}
	for x := n; x < len(acc); x++ {
		acc[x] += w * (uint32(a[x]) + uint32(b[x]))
	}
}

// blurSumsVector is blurSums with the vector sweeps: the centre, then one
// sweep per mirrored pair (acc stays in L1, so the extra passes over it are
// cheap next to the eight lanes per instruction).
func blurSumsVector[T uint8 | uint16](acc []uint32, centre []T, pair func(j int) ([]T, []T), taps []uint32, r int) {
	mulLine(acc, centre, taps[r])
	for j := 1; j <= r; j++ {
		a, b := pair(j)
		addPair(acc, a, b, taps[r+j])
	}
}
