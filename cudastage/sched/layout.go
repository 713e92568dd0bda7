package sched

// Device buffers of a slot. A segment's image ops ping-pong between two
// buffers: op q (counting only ops that make an image) reads the previous
// result and writes into the other buffer, so the input buffer is reused for
// intermediates once the first op has read it. Every op is one launch over the
// whole batch and a stream runs launches in order, so an op may overwrite its
// destination in any layout.
const (
	bufIn  = 0
	bufMid = 1
)

// Align is the byte alignment of every image inside a buffer: the CUDA
// allocation granularity, so that kernels may use vector loads on any image.
// Whatever packs images or tables for a kernel (the executor's slots, the
// CUDA device's scratch, a caller sizing a slot) aligns them with AlignUp.
const Align = 256

// AlignUp rounds n up to a multiple of Align: the bytes an image or table of
// n bytes takes in a buffer, its successor starting right after.
func AlignUp(n int) int { return (n + Align - 1) &^ (Align - 1) }

// AlignDown rounds n down to a multiple of Align: the largest aligned
// capacity that n bytes of memory give.
func AlignDown(n int) int { return n &^ (Align - 1) }

// chain is the static layout logic of one segment.
type chain struct {
	ops     []Op
	nImg    int // ops that make an image (or, the last one, a file)
	hasHist bool
	// array says the ops take arrays (Op.Array); nValues counts the
	// reductions among them, each writing one float32 per array.
	array   bool
	nValues int
	// encode is the last op's EncodeOp when the segment ends by encoding
	// each image into a file, else nil.
	encode *EncodeOp
	// caps[0] is the input area's capacity; caps[1+q] that of image op q's
	// output area (the buffer it writes). Both buffers have the slot's
	// capacity, but the areas are packed independently, op by op, so that
	// each op's output is tight and the final D2H copies no holes; the last
	// area is also bounded by the page-locked output it is copied into.
	caps []int
}

// newChain lays ops out in slots of slotBytes whose page-locked output holds
// hostOut bytes.
func newChain(ops []Op, slotBytes, hostOut int) *chain {
	c := &chain{ops: ops}
	for _, op := range ops {
		switch {
		case op.makesImage():
			c.nImg++
		case op.Reduce != nil:
			c.nValues++
		default:
			c.hasHist = true
		}
		c.array = op.Array
	}
	if n := len(ops); n > 0 {
		c.encode = ops[n-1].Encode
	}
	c.caps = make([]int, 1+c.nImg)
	for i := range c.caps {
		c.caps[i] = slotBytes
	}
	if c.nImg > 0 {
		c.caps[c.nImg] = min(slotBytes, hostOut)
	}
	return c
}

// OutputBytes is the room the output of one image of shape in takes in a
// slot's page-locked output after ops: the last image's bytes, or the
// encoder's bound for its file (0 when no op makes an image).
func OutputBytes(ops []Op, in Shape) int {
	c := newChain(ops, 0, 0)
	if c.nImg == 0 {
		return 0
	}
	_, need := c.plan(in)
	return need[c.nImg]
}

// outBuf is the buffer image op q writes.
func outBuf(q int) int {
	if q%2 == 0 {
		return bufMid
	}
	return bufIn
}

// finalBuf is the buffer holding the segment's output image, or -1 when no
// op makes an image (the output is the input, which the host already has).
func (c *chain) finalBuf() int {
	if c.nImg == 0 {
		return -1
	}
	return outBuf(c.nImg - 1)
}

// plan returns the shapes of an image through the segment (shapes[j] is op
// j's input, the last one the output; an encoding op's output shape is its
// input's) and the aligned bytes it takes in each area (see caps): an
// encoding op's area holds Bound bytes. A Bound below 1 takes no room and
// is refused by fits.
func (c *chain) plan(in Shape) (shapes []Shape, need []int) {
	shapes = make([]Shape, len(c.ops)+1)
	need = make([]int, 1+c.nImg)
	shapes[0] = in
	need[0] = AlignUp(in.Bytes())
	q := 0
	for j, op := range c.ops {
		shapes[j+1] = op.OutShape(shapes[j])
		if op.makesImage() {
			q++
			need[q] = AlignUp(shapes[j+1].Bytes())
			if op.Encode != nil {
				need[q] = AlignUp(op.Encode.Bound(shapes[j]))
			}
		}
	}
	return shapes, need
}

// fileBound is the most bytes the segment's encoder may write for an image
// of input shape in (0 when the segment does not encode).
func (c *chain) fileBound(shapes []Shape) int {
	if c.encode == nil {
		return 0
	}
	return c.encode.Bound(shapes[len(shapes)-2])
}

// fits reports whether an image needing need fits after used in every area.
func (c *chain) fits(used, need []int) bool {
	for i, n := range need {
		if n < 1 || used[i]+n > c.caps[i] {
			return false
		}
	}
	return true
}

// imgLayout is one image's place in a slot.
type imgLayout struct {
	shapes []Shape // from plan
	offs   []int   // offs[0]: input offset; offs[1+q]: offset of image op q's output
	dims   []int   // an array's axes, nil for an image
}

// valueOff is the offset in a slot's values buffer of reduction r's value
// for image i: each image's values are together, in op order.
func (c *chain) valueOff(i, r int) int { return (i*c.nValues + r) * ElemBytes }

// fillCalls sets calls[j] (one per op) for the images, given the slot's two
// pixel buffers, histogram buffer and values buffer. hist and value indices
// follow the order of imgs.
func (c *chain) fillCalls(calls []OpCall, imgs []imgLayout, bufs [2]DevPtr, hist, values DevPtr) {
	for j := range c.ops {
		calls[j].Op = c.ops[j]
		calls[j].Images = calls[j].Images[:0]
	}
	q, r := 0, 0 // image ops and reductions before op j
	for j, op := range c.ops {
		call := &calls[j]
		call.Src = bufs[bufIn]
		if q > 0 {
			call.Src = bufs[outBuf(q-1)]
		}
		call.Dst, call.Hist, call.Values = 0, 0, 0
		switch {
		case op.makesImage():
			call.Dst = bufs[outBuf(q)]
		case op.Reduce != nil:
			call.Values = values
		default:
			call.Hist = hist
		}
		for i, im := range imgs {
			oi := OpImage{In: im.shapes[j], Out: im.shapes[j+1], SrcOff: im.offs[q], Dims: im.dims}
			switch {
			case op.makesImage():
				oi.DstOff = im.offs[q+1]
			case op.Reduce != nil:
				oi.ValueOff = c.valueOff(i, r)
			default:
				oi.HistOff = i * HistBytes
			}
			call.Images = append(call.Images, oi)
		}
		switch {
		case op.makesImage():
			q++
		case op.Reduce != nil:
			r++
		}
	}
}
