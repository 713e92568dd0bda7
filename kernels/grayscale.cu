// grayscale.cu: the grayscale stage (DESIGN.md: Y = (9798 R + 19235 G + 3735 B + 16384) >> 15).
// See common.cuh for the launch table and the conventions every kernel follows.
#include "common.cuh"

// imgpipe_grayscale writes Y of each source image (C = 3) into a C = 1
// destination of the same size; a C = 1 source is copied. A tile is 256
// groups of 16 pixels of a row, counted row after row; tiles_x is the number
// of groups in one row, ceil(w / 16).
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_grayscale(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst)
{
    if (n <= 0)
        return;
    const Img d = tab[find_image(tab, n)];
    const int tile = (int)blockIdx.x - d.block0;
    const long long g = (long long)tile * IMGPIPE_THREADS + threadIdx.x;
    if (g >= (long long)d.tiles_x * d.h)
        return;
    const int y = (int)(g / d.tiles_x);
    const int x = (int)(g % d.tiles_x) * IMGPIPE_GRAY_PIXELS;
    const int cnt = min(IMGPIPE_GRAY_PIXELS, d.w - x);
    const u8* p = src + d.src_off + (size_t)y * d.src_stride + (size_t)x * d.c;
    u8* q = dst + d.dst_off + (size_t)y * d.dst_stride + x;
    u32 v[4];
    gray16(p, d.c, cnt, v);
    if (cnt == IMGPIPE_GRAY_PIXELS && aligned16(q)) {
        *(uint4*)q = make_uint4(v[0], v[1], v[2], v[3]);
    } else {
#pragma unroll
        for (int i = 0; i < IMGPIPE_GRAY_PIXELS; i++)
            if (i < cnt)
                q[i] = (u8)byte_at(v, i);
    }
}
