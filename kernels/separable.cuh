#pragma once
// separable.cuh: the horizontal and vertical passes that blur and boxblur share.
#include "common.cuh"

#define IMGPIPE_H_TILE 1024      // horizontal pass: samples of one row per block
#define IMGPIPE_H_ROWS 4         // horizontal pass: rows per block
#define IMGPIPE_V_TILE_X 64      // vertical pass: samples per block row
#define IMGPIPE_V_TILE_Y 64      // vertical pass: rows per block

// Horizontal and vertical passes of the separable filters. BLUR is the
// Gaussian of DESIGN.md (clamped borders, rounded fixed point); BOX is the
// window sum of boxblur (out-of-image samples count as 0 and are not counted).
enum { BLUR = 0, BOX = 1 };

// hpass filters samples [e0, e0 + 1024) of rows y0..y0+3 of one image, from
// bytes to uint16: blur gives h16 = (sum w_i p(clamp(x+i)) + 32) >> 6, box
// gives the sum of the in-image samples within r pixels. The row segments and
// their r-pixel halos on both sides are first staged in shared memory
// (clamped or zero outside the image), so the tap loop has no border tests;
// sm holds 4 rows of smrow bytes. Four rows per block keep four loads in
// flight per thread and spread the block's fixed costs (finding its image,
// the barrier) over more work. wt holds the taps (blur only), already in
// shared memory.
template <int C, int MODE>
__device__ __forceinline__ void hpass(const Img& d, int tile, int r, const u32* wt, const u8* __restrict__ src,
                                      u8* __restrict__ dst, u8* sm, int smrow)
{
    constexpr int HR = IMGPIPE_H_ROWS;
    const int rowE = d.w * C;
    const int y0 = (tile / d.tiles_x) * HR;
    const int e0 = (tile % d.tiles_x) * IMGPIPE_H_TILE;
    const int cnt = min(IMGPIPE_H_TILE, rowE - e0);
    const int rows = min(HR, d.h - y0);
    if (rows <= 0 || cnt <= 0)
        return; // only with a table that does not match the launch; uniform, before any barrier
    const int halo = r * C;
    const u8* base = src + d.src_off + (size_t)y0 * d.src_stride;
#pragma unroll 2
    for (int j = threadIdx.x; j < cnt + 2 * halo; j += IMGPIPE_THREADS) {
        const int q = e0 + j; // sample e0 - halo + j, shifted by r whole pixels to stay >= 0
        int px = q / C - r;
        const int ch = q % C;
        bool in = true;
        if (MODE == BLUR)
            px = min(max(px, 0), d.w - 1);
        else
            in = px >= 0 && px < d.w;
        const u8* p = base + px * C + ch;
        u8 v[HR];
#pragma unroll
        for (int k = 0; k < HR; k++)
            v[k] = (in && k < rows) ? p[(size_t)k * d.src_stride] : 0;
#pragma unroll
        for (int k = 0; k < HR; k++)
            sm[k * smrow + j] = v[k];
    }
    __syncthreads();
    for (int k = 0; k < rows; k++) {
        u16* out = (u16*)(dst + d.dst_off + (size_t)(y0 + k) * d.dst_stride) + e0;
        for (int le = 2 * threadIdx.x; le < cnt; le += 2 * IMGPIPE_THREADS) {
            const bool two = le + 1 < cnt;
            const u8* p = sm + k * smrow + le + halo; // p[0] is sample le, p[i*C] the same channel i pixels right
            u32 a0, a1 = 0;
            if (MODE == BLUR) {
                // The taps are symmetric (checked by the host), so mirrored
                // samples are added before they are multiplied.
                const u32 w0 = wt[r];
                a0 = w0 * p[0];
                if (two)
                    a1 = w0 * p[1];
                for (int i = 1; i <= r; i++) {
                    const u32 w = wt[r + i];
                    const int o = i * C;
                    a0 += w * ((u32)p[-o] + p[o]);
                    if (two)
                        a1 += w * ((u32)p[1 - o] + p[1 + o]);
                }
                a0 = (a0 + 32) >> 6;
                a1 = (a1 + 32) >> 6;
            } else {
                a0 = p[0];
                if (two)
                    a1 = p[1];
                for (int i = 1; i <= r; i++) {
                    const int o = i * C;
                    a0 += (u32)p[-o] + p[o];
                    if (two)
                        a1 += (u32)p[1 - o] + p[1 + o];
                }
            }
            u16* q = out + le;
            if (two && ((size_t)q & 3) == 0) {
                *(u32*)q = a0 | (a1 << 16);
            } else {
                q[0] = (u16)a0;
                if (two)
                    q[1] = (u16)a1;
            }
        }
    }
}

// vload is vpass's general staging loop, for tiles that reach past the
// image's right edge and for images whose rows are not 4-byte aligned: each
// word is loaded whole where it can be and as two samples where not, and
// samples past the row's end are 0 (never used).
template <int MODE>
__device__ __forceinline__ void vload(const Img& d, int y0, int rows, int r, int e, int rowE, const u8* __restrict__ sb,
                                      u32* sm)
{
    const int lane = threadIdx.x & 31;
    for (int rr = threadIdx.x >> 5; rr < rows + 2 * r; rr += IMGPIPE_THREADS / 32) {
        int yy = y0 - r + rr;
        bool in = yy >= 0 && yy < d.h;
        if (MODE == BLUR) {
            yy = min(max(yy, 0), d.h - 1);
            in = true;
        }
        u32 v = 0;
        if (in && e < rowE) {
            const u16* p = (const u16*)(sb + (size_t)yy * d.src_stride) + e;
            if (e + 1 < rowE && ((size_t)p & 3) == 0)
                v = *(const u32*)p;
            else
                v = p[0] | (e + 1 < rowE ? (u32)p[1] << 16 : 0u);
        }
        sm[rr * 32 + lane] = v;
    }
}

// vpass filters a tile of 64 rows by 64 samples of one image's uint16
// intermediate into bytes: blur gives (sum w_j h16(clamp(y+j)) + 2^21) >> 22,
// box gives floor(sum / count) over the in-image window. The tile and its
// r-row halos are staged in shared memory (sm, (64 + 2r) rows of 32 words,
// each word two adjacent samples); warp w then computes rows 8w..8w+7, each
// lane two adjacent samples.
template <int MODE>
__device__ __forceinline__ void vpass(const Img& d, int tile, int r, const u32* wt, const u8* __restrict__ src,
                                      u8* __restrict__ dst, u32* sm)
{
    const int rowE = d.w * d.c;
    const int e0 = (tile % d.tiles_x) * IMGPIPE_V_TILE_X;
    const int y0 = (tile / d.tiles_x) * IMGPIPE_V_TILE_Y;
    const int rows = min(IMGPIPE_V_TILE_Y, d.h - y0);
    if (rows <= 0 || e0 >= rowE)
        return; // only with a table that does not match the launch; uniform, before any barrier
    const int lane = threadIdx.x & 31;
    const int e = e0 + 2 * lane;
    const u8* sb = src + d.src_off;
    if (e0 + IMGPIPE_V_TILE_X <= rowE && (((size_t)sb | (size_t)d.src_stride) & 3) == 0) {
        // A full-width tile of an aligned image: one word per lane and row,
        // branch-free, so that the unrolled loop keeps 8 loads in flight.
#pragma unroll 8
        for (int rr = threadIdx.x >> 5; rr < rows + 2 * r; rr += IMGPIPE_THREADS / 32) {
            const int yy = y0 - r + rr;
            const int yc = min(max(yy, 0), d.h - 1);
            u32 v = *(const u32*)(sb + (size_t)yc * d.src_stride + 2 * (size_t)e);
            if (MODE == BOX && yc != yy)
                v = 0;
            sm[rr * 32 + lane] = v;
        }
    } else {
        vload<MODE>(d, y0, rows, r, e, rowE, sb, sm);
    }
    __syncthreads();
    if (e >= rowE)
        return;
    const bool two = e + 1 < rowE;
    // Box: the window's column count for the two samples' pixels.
    int cx0 = 0, cx1 = 0;
    if (MODE == BOX) {
        const int px0 = e / d.c, px1 = (e + 1) / d.c;
        cx0 = min(px0 + r, d.w - 1) - max(px0 - r, 0) + 1;
        cx1 = two ? min(px1 + r, d.w - 1) - max(px1 - r, 0) + 1 : 1;
    }
    const int rpt = IMGPIPE_V_TILE_Y / (IMGPIPE_THREADS / 32);
    for (int k = 0; k < rpt; k++) {
        const int yl = (threadIdx.x >> 5) * rpt + k;
        if (yl >= rows)
            break;
        const u32* p = sm + (yl + r) * 32 + lane; // p[0]: row y0 + yl; p[32*j]: j rows below
        u32 a0, a1;
        if (MODE == BLUR) {
            const u32 c = p[0];
            const u32 w0 = wt[r];
            a0 = w0 * (c & 0xffffu);
            a1 = w0 * (c >> 16);
            for (int i = 1; i <= r; i++) {
                const u32 up = p[-32 * i], dn = p[32 * i];
                const u32 w = wt[r + i];
                a0 += w * ((up & 0xffffu) + (dn & 0xffffu));
                a1 += w * ((up >> 16) + (dn >> 16));
            }
            a0 = (a0 + (1u << 21)) >> 22;
            a1 = (a1 + (1u << 21)) >> 22;
        } else {
            a0 = 0;
            a1 = 0;
            for (int i = -r; i <= r; i++) {
                const u32 v = p[32 * i];
                a0 += v & 0xffffu;
                a1 += v >> 16;
            }
            const int y = y0 + yl;
            const int cy = min(y + r, d.h - 1) - max(y - r, 0) + 1;
            a0 /= (u32)(cx0 * cy);
            a1 /= (u32)(cx1 * cy);
        }
        u8* q = dst + d.dst_off + (size_t)(y0 + yl) * d.dst_stride + e;
        if (two && ((size_t)q & 1) == 0) {
            *(u16*)q = (u16)(a0 | (a1 << 8));
        } else {
            q[0] = (u8)a0;
            if (two)
                q[1] = (u8)a1;
        }
    }
}
