// rotate.cu: the rotate stage (stages.Rotate), clockwise, W x H source:
//  90: out(x, y) = in(y, H-1-x)    180: out(x, y) = in(W-1-x, H-1-y)
// 270: out(x, y) = in(W-1-y, x)    See geometry.cuh for the tiling.
#include "geometry.cuh"

extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_rotate(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst, int angle)
{
    if (n <= 0)
        return;
    const Img d = tab[find_image(tab, n)];
    const long long p = pixel_index(d, (long long)d.w * d.h);
    if (p < 0)
        return;
    const int dw = angle == 180 ? d.w : d.h;
    const int x = (int)(p % dw), y = (int)(p / dw);
    int sx, sy;
    if (angle == 90) {
        sx = y;
        sy = d.h - 1 - x;
    } else if (angle == 180) {
        sx = d.w - 1 - x;
        sy = d.h - 1 - y;
    } else {
        sx = d.w - 1 - y;
        sy = x;
    }
    copy_px(dst + d.dst_off + (size_t)y * d.dst_stride + (size_t)x * d.c,
            src + d.src_off + (size_t)sy * d.src_stride + (size_t)sx * d.c, d.c);
}
