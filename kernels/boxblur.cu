// boxblur.cu: the boxblur stage (DESIGN.md: floor of the mean over the in-image window).
// See common.cuh for the launch table and the conventions every kernel follows.
#include "separable.cuh"

#define IMGPIPE_MAX_BOX_RADIUS 15

// imgpipe_box_h is the horizontal boxblur pass: window sums of in-image
// samples (at most 31 * 255, so uint16 holds them). Tiles as imgpipe_blur_h.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_box_h(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst, int r)
{
    constexpr int smrow = IMGPIPE_H_TILE + 2 * 3 * IMGPIPE_MAX_BOX_RADIUS;
    __shared__ u8 sm[IMGPIPE_H_ROWS * smrow];
    if (n <= 0 || r < 0 || r > IMGPIPE_MAX_BOX_RADIUS)
        return;
    const Img d = tab[find_image(tab, n)];
    const int tile = (int)blockIdx.x - d.block0;
    if (d.c == 3)
        hpass<3, BOX>(d, tile, r, nullptr, src, dst, sm, smrow);
    else
        hpass<1, BOX>(d, tile, r, nullptr, src, dst, sm, smrow);
}

// imgpipe_box_v is the vertical boxblur pass: sums of the horizontal sums,
// divided by the window's in-image pixel count. Tiles and dynamic shared
// memory as imgpipe_blur_v.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_box_v(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst, int r)
{
    extern __shared__ u32 vsm[];
    if (n <= 0 || r < 0 || r > IMGPIPE_MAX_BOX_RADIUS)
        return;
    const Img d = tab[find_image(tab, n)];
    const int tile = (int)blockIdx.x - d.block0;
    vpass<BOX>(d, tile, r, nullptr, src, dst, vsm);
}
