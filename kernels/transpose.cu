// transpose.cu: the transpose stage (out(x, y) = in(y, x)).
// See common.cuh for the launch table and the conventions every kernel follows.
#include "common.cuh"

#define IMGPIPE_TR_TILE_Y 32     // transpose tile: source rows
#define IMGPIPE_TR_TILE_X1 128   // transpose tile: source columns for C = 1
#define IMGPIPE_TR_TILE_X3 32    // transpose tile: source columns for C = 3

// transpose_tile copies one tile of TY source rows by TX source pixels into
// the destination, transposed, through shared memory so that both the reads
// and the writes are coalesced. Shared rows are padded by one word: the
// padded 32x33 tile of the classic coalesced transpose, here in bytes. For
// C = 1 the tile is 32x128 bytes: a warp reads one 128-byte source row, and
// writes four 32-byte destination rows, conflict-free. Interior tiles of
// 4-byte-aligned images move words; edge tiles and unaligned images move
// bytes.
template <int C>
__device__ __forceinline__ void transpose_tile(const Img& d, int tile, const u8* __restrict__ src,
                                               u8* __restrict__ dst, u8* sm)
{
    constexpr int TY = IMGPIPE_TR_TILE_Y;
    constexpr int TX = C == 1 ? IMGPIPE_TR_TILE_X1 : IMGPIPE_TR_TILE_X3;
    constexpr int IB = TX * C;     // bytes of one source row of the tile
    constexpr int OB = TY * C;     // bytes of one destination row of the tile
    constexpr int IW = IB / 4;     // words of one source row
    constexpr int OW = OB / 4;     // words of one destination row
    constexpr int S = IB + 4;      // shared row stride in bytes (the padding)
    constexpr int NL = TY * IW / IMGPIPE_THREADS;
    constexpr int NS = TX * OW / IMGPIPE_THREADS;
    static_assert(NL * IMGPIPE_THREADS == TY * IW && NS * IMGPIPE_THREADS == TX * OW, "tile must split evenly");

    const int x0 = (tile % d.tiles_x) * TX;
    const int y0 = (tile / d.tiles_x) * TY;
    const int rows = min(TY, d.h - y0);
    const int cols = min(TX, d.w - x0);
    const u8* sb = src + d.src_off + (size_t)y0 * d.src_stride + (size_t)x0 * C;
    u8* db = dst + d.dst_off + (size_t)x0 * d.dst_stride + (size_t)y0 * C;
    if (rows <= 0 || cols <= 0)
        return; // only with a table that does not match the launch; uniform, before any barrier
    const bool fast = rows == TY && cols == TX &&
                      (((size_t)sb | (size_t)db | (size_t)d.src_stride | (size_t)d.dst_stride) & 3) == 0;

    if (fast) {
        u32 v[NL];
#pragma unroll
        for (int k = 0; k < NL; k++) {
            const int i = threadIdx.x + k * IMGPIPE_THREADS;
            v[k] = *(const u32*)(sb + (size_t)(i / IW) * d.src_stride + 4 * (i % IW));
        }
#pragma unroll
        for (int k = 0; k < NL; k++) {
            const int i = threadIdx.x + k * IMGPIPE_THREADS;
            *(u32*)(sm + (i / IW) * S + 4 * (i % IW)) = v[k];
        }
    } else {
        for (int i = threadIdx.x; i < TY * IB; i += IMGPIPE_THREADS) {
            const int r = i / IB, b = i % IB;
            sm[r * S + b] = (r < rows && b < cols * C) ? sb[(size_t)r * d.src_stride + b] : 0;
        }
    }
    __syncthreads();
    if (fast) {
#pragma unroll
        for (int k = 0; k < NS; k++) {
            const int i = threadIdx.x + k * IMGPIPE_THREADS;
            const int orow = i / OW, ow = i % OW;
            u32 word = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int b = 4 * ow + j; // byte of the destination row: source row b / C, channel b % C
                word |= (u32)sm[(b / C) * S + orow * C + b % C] << (8 * j);
            }
            *(u32*)(db + (size_t)orow * d.dst_stride + 4 * ow) = word;
        }
    } else {
        for (int i = threadIdx.x; i < TX * OB; i += IMGPIPE_THREADS) {
            const int orow = i / OB, b = i % OB;
            if (orow < cols && b < rows * C)
                db[(size_t)orow * d.dst_stride + b] = sm[(b / C) * S + orow * C + b % C];
        }
    }
}

// imgpipe_transpose writes each source image transposed (h x w, same C). A
// tile is 32 source rows by 128 (C = 1) or 32 (C = 3) source pixels; tiles_x
// is the number of tiles across a source row.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_transpose(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst)
{
    __shared__ __align__(16) u8 sm[IMGPIPE_TR_TILE_Y * (IMGPIPE_TR_TILE_X1 + 4)];
    if (n <= 0)
        return;
    const Img d = tab[find_image(tab, n)];
    const int tile = (int)blockIdx.x - d.block0;
    if (d.c == 3)
        transpose_tile<3>(d, tile, src, dst, sm);
    else
        transpose_tile<1>(d, tile, src, dst, sm);
}
