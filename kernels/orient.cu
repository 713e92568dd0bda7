// orient.cu: the EXIF orientation of a decoded RGB image. Not a stage: the CUDA device's file
// decoder (package cudastage) runs it after nvJPEG decoded a JPEG upright into scratch memory.
// The mapping is the one package stages applies for the CPU decoders (stages' orientLine): 2
// mirrors, 3 turns 180°, 4 flips, 5 transposes, 6 turns 90° clockwise, 7 transverses, 8 turns 90°
// counter-clockwise. Every output pixel is a copy of one input pixel, so it is bit-exact by
// construction.
#include "common.cuh"

// imgpipe_orient writes the sw x sh RGB image src (packed, stride 3*sw) into dst under
// orientation o, packed: dw x dh with dw = sh, dh = sw for o >= 5, else sw x sh. One thread per
// destination pixel, in destination order, so the writes are coalesced.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_orient(const u8* __restrict__ src, int sw, int sh, u8* __restrict__ dst, int o)
{
    const int dw = o >= 5 ? sh : sw;
    const long long n = (long long)sw * sh;
    const long long i = (long long)blockIdx.x * IMGPIPE_THREADS + threadIdx.x;
    if (i >= n)
        return;
    const int dx = (int)(i % dw), dy = (int)(i / dw);
    int x, y; // the source pixel that lands on (dx, dy)
    switch (o) {
    case 2: x = sw - 1 - dx; y = dy; break;
    case 3: x = sw - 1 - dx; y = sh - 1 - dy; break;
    case 4: x = dx; y = sh - 1 - dy; break;
    case 5: x = dy; y = dx; break;
    case 6: x = dy; y = sh - 1 - dx; break;
    case 7: x = sw - 1 - dy; y = sh - 1 - dx; break;
    case 8: x = sw - 1 - dy; y = dx; break;
    default: x = dx; y = dy; break;
    }
    const u8* s = src + ((size_t)y * sw + x) * 3;
    u8* d = dst + (size_t)i * 3;
    d[0] = s[0];
    d[1] = s[1];
    d[2] = s[2];
}
