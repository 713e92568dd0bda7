package sourcemodule_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sourcemodule"
)

// doubleSrc is the seed's double_array kernel.
const doubleSrc = `extern "C" __global__ void double_array(float *a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= 2.0f;
}
`

// addSrc adds two vectors into a third.
const addSrc = `extern "C" __global__ void add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
`

// Double an array in place: PyCUDA's first example (mem_alloc, memcpy_htod,
// SourceModule, get_function, launch, memcpy_dtoh). Without a usable GPU it
// prints nothing.
func Example_doubleArray() {
	c, err := sourcemodule.Open(0, sourcemodule.Config{})
	if err != nil {
		return // no usable GPU here; err says why
	}
	defer c.Close()
	const n = 10
	host, err := c.HostAlloc(context.Background(), 4*n)
	if err != nil {
		panic(err)
	}
	defer host.Free()
	a := host.Float32s()
	for i := range a {
		a[i] = float32(i)
	}
	dev, err := c.Alloc(4 * n)
	if err != nil {
		panic(err)
	}
	defer dev.Free()
	mod, err := c.Compile("double.cu", doubleSrc)
	if err != nil {
		panic(err)
	}
	double, err := mod.Function("double_array")
	if err != nil {
		panic(err)
	}
	if err := c.CopyHtoD(dev, host); err != nil {
		panic(err)
	}
	const block = 256
	grid := uint32((n + block - 1) / block)
	if err := double.Launch([3]uint32{grid, 1, 1}, [3]uint32{block, 1, 1}, sourcemodule.Ptr(dev), sourcemodule.Int(n)); err != nil {
		panic(err)
	}
	if err := c.CopyDtoH(host, dev); err != nil {
		panic(err)
	}
	if err := c.Synchronize(); err != nil {
		panic(err)
	}
	fmt.Println(a)
	// On a GPU: [0 2 4 6 8 10 12 14 16 18]
}

// Add two vectors: three device buffers, one kernel with four arguments.
// Without a usable GPU it prints nothing.
func Example_addVectors() {
	c, err := sourcemodule.Open(0, sourcemodule.Config{})
	if err != nil {
		return // no usable GPU here; err says why
	}
	defer c.Close()
	const n = 5
	ctx := context.Background()
	var host [3]*sourcemodule.HostBuffer
	var dev [3]*sourcemodule.DeviceBuffer
	for i := range host {
		if host[i], err = c.HostAlloc(ctx, 4*n); err != nil {
			panic(err)
		}
		defer host[i].Free()
		if dev[i], err = c.Alloc(4 * n); err != nil {
			panic(err)
		}
		defer dev[i].Free()
	}
	a, b := host[0].Float32s(), host[1].Float32s()
	for i := range n {
		a[i], b[i] = float32(i), float32(10*i)
	}
	mod, err := c.Compile("add.cu", addSrc)
	if err != nil {
		panic(err)
	}
	add, err := mod.Function("add")
	if err != nil {
		panic(err)
	}
	for i := range 2 {
		if err := c.CopyHtoD(dev[i], host[i]); err != nil {
			panic(err)
		}
	}
	err = add.Launch([3]uint32{1, 1, 1}, [3]uint32{32, 1, 1},
		sourcemodule.Ptr(dev[0]), sourcemodule.Ptr(dev[1]), sourcemodule.Ptr(dev[2]), sourcemodule.Int(n))
	if err != nil {
		panic(err)
	}
	if err := c.CopyDtoH(host[2], dev[2]); err != nil {
		panic(err)
	}
	if err := c.Synchronize(); err != nil {
		panic(err)
	}
	fmt.Println(host[2].Float32s())
	// On a GPU: [0 11 22 33 44]
}

// The examples have no Output line (they print only on a GPU), so go test
// would only compile them: this runs them. Without a GPU they return at
// Open; on one, any failure after Open panics and fails the test.
func TestExamplesRun(t *testing.T) {
	Example_doubleArray()
	Example_addVectors()
}
