// histogram.cu: the histogram stage (256 counts of the gray level).
// See common.cuh for the launch table and the conventions every kernel follows.
#include "common.cuh"

#define IMGPIPE_HIST_GROUPS 4    // 16-pixel groups per thread in histogram

// imgpipe_histogram adds each image's 256 bin counts (values for C = 1, Y for
// C = 3) to 256 uint64 at dst + dst_off, which the caller zeroes first. A tile
// is 4 x 256 groups of 16 pixels, row after row (tiles_x = ceil(w / 16) as in
// grayscale). Each warp counts into its own shared sub-histogram, which keeps
// runs of equal values from serialising the whole block on one counter; the
// block then adds its non-zero bins to the global counts.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_histogram(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst)
{
    __shared__ u32 bins[IMGPIPE_THREADS / 32][256];
    if (n <= 0)
        return;
    const Img d = tab[find_image(tab, n)];
    const int tile = (int)blockIdx.x - d.block0;
    for (int i = threadIdx.x; i < (IMGPIPE_THREADS / 32) * 256; i += IMGPIPE_THREADS)
        (&bins[0][0])[i] = 0;
    __syncthreads();
    u32* mine = bins[threadIdx.x >> 5];
    const long long total = (long long)d.tiles_x * d.h;
    const long long g0 = (long long)tile * (IMGPIPE_THREADS * IMGPIPE_HIST_GROUPS) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < IMGPIPE_HIST_GROUPS; k++) {
        const long long g = g0 + k * IMGPIPE_THREADS;
        if (g < total) {
            const int y = (int)(g / d.tiles_x);
            const int x = (int)(g % d.tiles_x) * IMGPIPE_GRAY_PIXELS;
            const int cnt = min(IMGPIPE_GRAY_PIXELS, d.w - x);
            u32 v[4];
            gray16(src + d.src_off + (size_t)y * d.src_stride + (size_t)x * d.c, d.c, cnt, v);
#pragma unroll
            for (int i = 0; i < IMGPIPE_GRAY_PIXELS; i++)
                if (i < cnt)
                    atomicAdd(&mine[byte_at(v, i)], 1u);
        }
    }
    __syncthreads();
    u64* h = (u64*)(dst + d.dst_off);
    for (int b = threadIdx.x; b < 256; b += IMGPIPE_THREADS) {
        u32 s = 0;
#pragma unroll
        for (int w = 0; w < IMGPIPE_THREADS / 32; w++)
            s += bins[w][b];
        if (s != 0)
            atomicAdd(&h[b], (u64)s);
    }
}
