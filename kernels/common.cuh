#pragma once
// common.cuh: what every imgpipe kernel shares: the launch table entry (Img),
// finding a block's image, and the gray helpers.
//
// imgpipe kernels: batched, bit-exact GPU versions of the stages of DESIGN.md.
//
// Every kernel covers a whole batch in one launch. The batch is described by a
// table of Img entries in device memory (built by package cudastage, which
// mirrors the layout and the tiling constants below): one entry per image,
// giving where its source and destination lie in the launch's two buffers,
// its size, and the first block of the launch that works on it. Each block
// finds its image by a binary search over block0 (the entries are sorted by
// it), so a batch may mix sizes freely and no block is wasted on padding.
//
// All arithmetic of the image kernels is the exact integer arithmetic of
// DESIGN.md; no floating point is used. (The float32 array kernels of
// array.cu launch per array, without a table, and use exactly rounded
// single-precision operations: see there.) Vector (16- or 4-byte) accesses are used only where the
// address is aligned, which each thread checks on the real pointer, so any
// offset and stride give the same bits, only slower.
//
// Only C (not C++) linkage names are exported, no CUDA runtime API is used,
// and every kernel runs with 256 threads per block.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Kernel constants. Each is mirrored in Go by the launcher file of package
// cudastage that uses it (a CPU test there reads them from these sources, so
// they cannot drift apart).
#define IMGPIPE_THREADS 256
#define IMGPIPE_GRAY_PIXELS 16   // pixels per thread in grayscale and histogram
#define IMGPIPE_IMG_BYTES 48     // sizeof(Img)

// Img is one image of a batch, as one kernel sees it. Offsets are in bytes
// from the launch's source and destination buffers; strides are bytes per
// row. w, h and c are the source image's (the destination's shape follows
// from the kernel). block0 is the first block of the launch that belongs to
// this image; tiles_x is the number of tiles across one row (what a tile is
// depends on the kernel, see each one).
struct Img {
    u64 src_off;
    u64 dst_off;
    int w, h, c;
    int src_stride;
    int dst_stride;
    int block0;
    int tiles_x;
    int reserved;
};
static_assert(sizeof(Img) == IMGPIPE_IMG_BYTES, "Img must match cudastage's encoder");
// find_image returns the index of the entry whose blocks contain blockIdx.x:
// the last entry with block0 <= blockIdx.x. Every thread of the block reads
// the same entries, so the loads are broadcasts served from L1.
__device__ __forceinline__ int find_image(const Img* __restrict__ tab, int n)
{
    const int b = (int)blockIdx.x;
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (tab[mid].block0 <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__device__ __forceinline__ bool aligned16(const void* p)
{
    return ((size_t)p & 15) == 0;
}

__device__ __forceinline__ u32 luma(u32 r, u32 g, u32 b)
{
    return (9798u * r + 19235u * g + 3735u * b + 16384u) >> 15;
}

// byte_at returns byte k (0 = lowest address) of a little-endian word array.
__device__ __forceinline__ u32 byte_at(const u32* v, int k)
{
    return (v[k >> 2] >> (8 * (k & 3))) & 0xffu;
}

// gray16 computes the gray values of the n <= 16 pixels of c channels at p
// into out[0..3], packed as bytes (pixel i in byte i). Pixels past n are 0.
// Full, aligned groups are read with 16-byte loads.
__device__ __forceinline__ void gray16(const u8* __restrict__ p, int c, int n, u32 out[4])
{
    out[0] = out[1] = out[2] = out[3] = 0;
    if (n == IMGPIPE_GRAY_PIXELS && aligned16(p)) {
        if (c == 3) {
            const uint4 a = ((const uint4*)p)[0];
            const uint4 b = ((const uint4*)p)[1];
            const uint4 d = ((const uint4*)p)[2];
            const u32 in[12] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, d.x, d.y, d.z, d.w};
#pragma unroll
            for (int i = 0; i < 16; i++)
                out[i >> 2] |= luma(byte_at(in, 3 * i), byte_at(in, 3 * i + 1), byte_at(in, 3 * i + 2)) << (8 * (i & 3));
        } else {
            const uint4 a = *(const uint4*)p;
            out[0] = a.x;
            out[1] = a.y;
            out[2] = a.z;
            out[3] = a.w;
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < IMGPIPE_GRAY_PIXELS; i++) {
        if (i < n) {
            const u32 v = c == 3 ? luma(p[3 * i], p[3 * i + 1], p[3 * i + 2]) : p[i];
            out[i >> 2] |= v << (8 * (i & 3));
        }
    }
}
