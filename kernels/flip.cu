// flip.cu: the flip stage (stages.Flip): axis h: out(x, y) = in(W-1-x, y);
// axis v: out(x, y) = in(x, H-1-y). See geometry.cuh for the tiling.
#include "geometry.cuh"

extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_flip(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst, int vertical)
{
    if (n <= 0)
        return;
    const Img d = tab[find_image(tab, n)];
    const long long p = pixel_index(d, (long long)d.w * d.h);
    if (p < 0)
        return;
    const int x = (int)(p % d.w), y = (int)(p / d.w);
    const int sx = vertical ? x : d.w - 1 - x;
    const int sy = vertical ? d.h - 1 - y : y;
    copy_px(dst + d.dst_off + (size_t)y * d.dst_stride + (size_t)x * d.c,
            src + d.src_off + (size_t)sy * d.src_stride + (size_t)sx * d.c, d.c);
}
