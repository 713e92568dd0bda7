// imgpipe kernels: batched, bit-exact GPU versions of the stages of DESIGN.md.
//
// Every kernel covers a whole batch in one launch. The batch is described by a
// table of Img entries in device memory (built by package cudastage, which
// mirrors the layout and the tiling constants below): one entry per image,
// giving where its source and destination lie in the launch's two buffers,
// its size, and the first block of the launch that works on it. Each block
// finds its image by a binary search over block0 (the entries are sorted by
// it), so a batch may mix sizes freely and no block is wasted on padding.
//
// All arithmetic is the exact integer arithmetic of DESIGN.md; no floating
// point is used. Vector (16- or 4-byte) accesses are used only where the
// address is aligned, which each thread checks on the real pointer, so any
// offset and stride give the same bits, only slower.
//
// Only C (not C++) linkage names are exported, no CUDA runtime API is used,
// and every kernel runs with 256 threads per block.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Tiling constants. cudastage/ops.go has the same numbers (a CPU test there
// reads them from this file, so they cannot drift apart).
#define IMGPIPE_THREADS 256
#define IMGPIPE_GRAY_PIXELS 16   // pixels per thread in grayscale and histogram
#define IMGPIPE_HIST_GROUPS 4    // 16-pixel groups per thread in histogram
#define IMGPIPE_TR_TILE_Y 32     // transpose tile: source rows
#define IMGPIPE_TR_TILE_X1 128   // transpose tile: source columns for C = 1
#define IMGPIPE_TR_TILE_X3 32    // transpose tile: source columns for C = 3
#define IMGPIPE_H_TILE 1024      // horizontal pass: samples of one row per block
#define IMGPIPE_H_ROWS 4         // horizontal pass: rows per block
#define IMGPIPE_V_TILE_X 64      // vertical pass: samples per block row
#define IMGPIPE_V_TILE_Y 64      // vertical pass: rows per block
#define IMGPIPE_MAX_BLUR_RADIUS 96
#define IMGPIPE_MAX_BOX_RADIUS 15
#define IMGPIPE_IMG_BYTES 48     // sizeof(Img)

// Img is one image of a batch, as one kernel sees it. Offsets are in bytes
// from the launch's source and destination buffers; strides are bytes per
// row. w, h and c are the source image's (the destination's shape follows
// from the kernel). block0 is the first block of the launch that belongs to
// this image; tiles_x is the number of tiles across one row (what a tile is
// depends on the kernel, see each one).
struct Img {
    u64 src_off;
    u64 dst_off;
    int w, h, c;
    int src_stride;
    int dst_stride;
    int block0;
    int tiles_x;
    int reserved;
};
static_assert(sizeof(Img) == IMGPIPE_IMG_BYTES, "Img must match cudastage's encoder");

// Taps is the blur kernel, passed by value as a kernel parameter (it lives in
// the parameter constant bank, so concurrent launches with different sigmas
// on different streams never interfere). w[i + r] is w_i of DESIGN.md.
struct Taps {
    int r;
    u32 w[2 * IMGPIPE_MAX_BLUR_RADIUS + 1];
};

// find_image returns the index of the entry whose blocks contain blockIdx.x:
// the last entry with block0 <= blockIdx.x. Every thread of the block reads
// the same entries, so the loads are broadcasts served from L1.
__device__ __forceinline__ int find_image(const Img* __restrict__ tab, int n)
{
    const int b = (int)blockIdx.x;
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (tab[mid].block0 <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__device__ __forceinline__ bool aligned16(const void* p)
{
    return ((size_t)p & 15) == 0;
}

__device__ __forceinline__ u32 luma(u32 r, u32 g, u32 b)
{
    return (9798u * r + 19235u * g + 3735u * b + 16384u) >> 15;
}

// byte_at returns byte k (0 = lowest address) of a little-endian word array.
__device__ __forceinline__ u32 byte_at(const u32* v, int k)
{
    return (v[k >> 2] >> (8 * (k & 3))) & 0xffu;
}

// gray16 computes the gray values of the n <= 16 pixels of c channels at p
// into out[0..3], packed as bytes (pixel i in byte i). Pixels past n are 0.
// Full, aligned groups are read with 16-byte loads.
__device__ __forceinline__ void gray16(const u8* __restrict__ p, int c, int n, u32 out[4])
{
    out[0] = out[1] = out[2] = out[3] = 0;
    if (n == IMGPIPE_GRAY_PIXELS && aligned16(p)) {
        if (c == 3) {
            const uint4 a = ((const uint4*)p)[0];
            const uint4 b = ((const uint4*)p)[1];
            const uint4 d = ((const uint4*)p)[2];
            const u32 in[12] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, d.x, d.y, d.z, d.w};
#pragma unroll
            for (int i = 0; i < 16; i++)
                out[i >> 2] |= luma(byte_at(in, 3 * i), byte_at(in, 3 * i + 1), byte_at(in, 3 * i + 2)) << (8 * (i & 3));
        } else {
            const uint4 a = *(const uint4*)p;
            out[0] = a.x;
            out[1] = a.y;
            out[2] = a.z;
            out[3] = a.w;
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < IMGPIPE_GRAY_PIXELS; i++) {
        if (i < n) {
            const u32 v = c == 3 ? luma(p[3 * i], p[3 * i + 1], p[3 * i + 2]) : p[i];
            out[i >> 2] |= v << (8 * (i & 3));
        }
    }
}

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
