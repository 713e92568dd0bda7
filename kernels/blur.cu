// blur.cu: the blur stage (DESIGN.md: separable integer Gaussian, replicated borders).
// See common.cuh for the launch table and the conventions every kernel follows.
#include "separable.cuh"

#define IMGPIPE_MAX_BLUR_RADIUS 96

// Taps is the blur kernel, passed by value as a kernel parameter (it lives in
// the parameter constant bank, so concurrent launches with different sigmas
// on different streams never interfere). w[i + r] is w_i of DESIGN.md.
struct Taps {
    int r;
    u32 w[2 * IMGPIPE_MAX_BLUR_RADIUS + 1];
};

// imgpipe_blur_h is the horizontal blur pass: source bytes to the uint16
// intermediate (dst, same w x h x c, strides in bytes). A tile is 1024
// samples of 4 rows; tiles_x = ceil(w*c / 1024).
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_blur_h(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst,
               const __grid_constant__ Taps taps)
{
    constexpr int smrow = IMGPIPE_H_TILE + 2 * 3 * IMGPIPE_MAX_BLUR_RADIUS;
    __shared__ u8 sm[IMGPIPE_H_ROWS * smrow];
    __shared__ u32 wt[2 * IMGPIPE_MAX_BLUR_RADIUS + 1];
    if (n <= 0 || taps.r < 1 || taps.r > IMGPIPE_MAX_BLUR_RADIUS)
        return;
    const Img d = tab[find_image(tab, n)];
    const int tile = (int)blockIdx.x - d.block0;
    for (int i = threadIdx.x; i <= 2 * taps.r; i += IMGPIPE_THREADS)
        wt[i] = taps.w[i];
    if (d.c == 3)
        hpass<3, BLUR>(d, tile, taps.r, wt, src, dst, sm, smrow);
    else
        hpass<1, BLUR>(d, tile, taps.r, wt, src, dst, sm, smrow);
}

// imgpipe_blur_v is the vertical blur pass: the uint16 intermediate (src) to
// destination bytes. A tile is 64 rows by 64 samples; tiles_x =
// ceil(w*c / 64). Dynamic shared memory: (64 + 2r) * 128 bytes.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_blur_v(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst,
               const __grid_constant__ Taps taps)
{
    extern __shared__ u32 vsm[];
    __shared__ u32 wt[2 * IMGPIPE_MAX_BLUR_RADIUS + 1];
    if (n <= 0 || taps.r < 1 || taps.r > IMGPIPE_MAX_BLUR_RADIUS)
        return;
    const Img d = tab[find_image(tab, n)];
    const int tile = (int)blockIdx.x - d.block0;
    for (int i = threadIdx.x; i <= 2 * taps.r; i += IMGPIPE_THREADS)
        wt[i] = taps.w[i];
    vpass<BLUR>(d, tile, taps.r, wt, src, dst, vsm);
}
