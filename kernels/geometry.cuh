#pragma once
// geometry.cuh: what the geometry kernels (crop, flip, rotate, resize) share.
// They spend one thread per destination pixel: block b of an image covers its
// destination pixels (b - block0)·256 … +255 in row-major order (tiles_x is
// unused), so a batch of mixed sizes wastes at most one partial block per image.
#include "common.cuh"

// pixel_index returns this thread's destination pixel of image d, or -1
// past the image's npx pixels.
__device__ __forceinline__ long long pixel_index(const Img& d, long long npx)
{
    const long long p = (long long)((int)blockIdx.x - d.block0) * IMGPIPE_THREADS + threadIdx.x;
    return p < npx ? p : -1;
}

// copy_px copies one pixel of c (1 or 3) bytes.
__device__ __forceinline__ void copy_px(u8* __restrict__ o, const u8* __restrict__ s, int c)
{
    o[0] = s[0];
    if (c == 3) {
        o[1] = s[1];
        o[2] = s[2];
    }
}

// extra_records returns the per-image records that follow the n entries of a
// single-pass launch table (cudastage's launcher.extra).
template <typename T>
__device__ __forceinline__ const T* extra_records(const Img* tab, int n)
{
    return (const T*)(tab + n);
}
