// array.cu: the float32 array stages (scale, add, sum, min, max), bit for bit
// the CPU references of package stages/array.
//
// Unlike the image kernels these take no launch table: package cudastage
// launches them once per array of a batch (and, for a reduction, once per
// level of its tree), 1-D with IMGPIPE_THREADS threads per block, since a
// batch holds few arrays and each is large. Element i of a launch is
// blockIdx.x * IMGPIPE_THREADS + threadIdx.x.
//
// Exactness: every operation is one IEEE single-precision operation rounded
// to nearest even, written with the _rn intrinsics so that nvcc can neither
// contract a multiply and an add into an FMA nor flush subnormals; and every
// NaN written is the quiet NaN 0x7FC00000, as on the CPU (a GPU's own NaN is
// 0x7FFFFFFF, x86's keeps an operand's payload).
#include "common.cuh"

#define IMGPIPE_NAN_BITS 2143289344 // 0x7FC00000: stages/array.NaN

__device__ __forceinline__ float canon(float v)
{
    return v != v ? __int_as_float(IMGPIPE_NAN_BITS) : v;
}

// imgpipe_array_scale sets out[i] = in[i] * f for i < n.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_array_scale(const float* __restrict__ in, float* __restrict__ out, long long n, float f)
{
    const long long i = (long long)blockIdx.x * IMGPIPE_THREADS + threadIdx.x;
    if (i < n)
        out[i] = canon(__fmul_rn(in[i], f));
}

// imgpipe_array_add sets out[i] = in[i] + v for i < n.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_array_add(const float* __restrict__ in, float* __restrict__ out, long long n, float v)
{
    const long long i = (long long)blockIdx.x * IMGPIPE_THREADS + threadIdx.x;
    if (i < n)
        out[i] = canon(__fadd_rn(in[i], v));
}

// The reductions' combining functions. min and max order numbers with
// -0 < +0, and a NaN wins: the order is total, so any tree gives the CPU's
// sequential result (stages/array.Less).
struct SumOp {
    __device__ static float f(float a, float b) { return __fadd_rn(a, b); }
};
struct MinOp {
    __device__ static float f(float a, float b)
    {
        if (a != a || b != b)
            return __int_as_float(IMGPIPE_NAN_BITS);
        if (a == b) // equal numbers differ only in the sign of a zero
            return signbit(a) ? a : b;
        return a < b ? a : b;
    }
};
struct MaxOp {
    __device__ static float f(float a, float b)
    {
        if (a != a || b != b)
            return __int_as_float(IMGPIPE_NAN_BITS);
        if (a == b)
            return signbit(a) ? b : a;
        return a > b ? a : b;
    }
};

// reduce_level is one level of stages/array.SumOrder's tree: block b reduces
// in[256 b .. 256 b + 255] (fewer in the last block) in shared memory with
// halving strides, s[t] = s[t] op s[t + stride] for t < stride and
// t + stride inside the block, and writes s[0] to out[b]. The host repeats it
// on the block values until one remains.
template <class Op>
__device__ __forceinline__ void reduce_level(const float* __restrict__ in, float* __restrict__ out, long long n)
{
    __shared__ float s[IMGPIPE_THREADS];
    const int t = threadIdx.x;
    const long long base = (long long)blockIdx.x * IMGPIPE_THREADS;
    const int cnt = (int)min((long long)IMGPIPE_THREADS, n - base);
    if (t < cnt)
        s[t] = in[base + t];
    __syncthreads();
    for (int stride = IMGPIPE_THREADS / 2; stride > 0; stride >>= 1) {
        if (t < stride && t + stride < cnt)
            s[t] = Op::f(s[t], s[t + stride]);
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = canon(s[0]);
}

// imgpipe_array_sum, _min and _max are one level of their reduction over n
// values.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_array_sum(const float* __restrict__ in, float* __restrict__ out, long long n)
{
    reduce_level<SumOp>(in, out, n);
}

extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_array_min(const float* __restrict__ in, float* __restrict__ out, long long n)
{
    reduce_level<MinOp>(in, out, n);
}

extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_array_max(const float* __restrict__ in, float* __restrict__ out, long long n)
{
    reduce_level<MaxOp>(in, out, n);
}
