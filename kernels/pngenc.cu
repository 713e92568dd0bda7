// pngenc.cu: the fast PNG encoder (docs/png-fast.md), the save stage's
// kernels when a device segment ends with a png-fast encoding op.
// See common.cuh for the launch table and the conventions every kernel follows.
//
// Three launches over the whole batch, each with the same parameters (table,
// n, src, dst, scratch, lens, crc):
//
//  1. imgpipe_png_plan, one CTA per 64 KiB block of the filtered stream F of
//     every image: filters the block on the fly from the source image,
//     counts its histogram and its Adler-32 partial sums, builds the block's
//     code lengths (§3), canonical codes and header (§4), and records them
//     with the block's compressed size in the block's record in scratch.
//  2. imgpipe_png_layout, one CTA per image: exclusive prefix sums of the
//     blocks' chunk sizes (each block is byte-aligned, so its IDAT chunk is
//     placed from sizes alone), the image's Adler-32 from the partial sums,
//     the signature, IHDR and IEND, and the file's length in lens.
//  3. imgpipe_png_pack, one CTA per block: filters the block again, packs its
//     codes into the block's staging area in scratch (per-thread bit offsets
//     from a block-wide scan; whole words, atomicOr only on words two threads
//     share), then copies the chunk into the file with its CRC-32 (per-thread
//     partial CRCs combined with GF(2) shifts).
//
// Launch table entries (Img): src_off/src_stride/w/h/c are the source
// image's, dst_off is its file's offset in dst, tiles_x is its block count
// nb, and reserved is the global index of its first block (the sum of nb
// over the earlier images), which indexes the block records. Scratch holds
// NB = tab[n-1].reserved + tab[n-1].tiles_x records of
// IMGPIPE_PNG_REC_BYTES, then NB staging areas of IMGPIPE_PNG_STAGE_BYTES.
#include "common.cuh"
#include "pnghuff.cuh"

#define IMGPIPE_PNG_BLOCK 65536        // bytes of F per deflate block (§2)
#define IMGPIPE_PNG_REC_BYTES 1536     // sizeof(PngBlock)
#define IMGPIPE_PNG_STAGE_BYTES 123344 // one block's bit stream: §6's bound in words, a multiple of 16

namespace png {

constexpr int kHalf = IMGPIPE_PNG_BLOCK / 2; // F bytes in shared memory at once
constexpr int kSeg = kHalf / IMGPIPE_THREADS; // F bytes per thread when packing
constexpr int kHdrWords = 116;               // 3686 header bits at most (§6), in words
constexpr int kWarps = IMGPIPE_THREADS / 32;
constexpr u32 kAdlerMod = 65521;

// PngBlock is one block's record in scratch: written by png_plan (codes,
// header, sizes, Adler sums), png_layout (chunk offset, Adler-32), read by
// png_pack.
struct PngBlock {
    u32 code[257];      // bit-reversed canonical code | length << 16
    u32 hdr_bits;       // bits of the header (BFINAL, BTYPE, HLIT ... code lengths)
    u32 bits;           // hdr_bits + every literal's code + the end-of-block code
    u32 nbytes;         // the block's compressed bytes, alignment and sync marker included
    u64 sum_a;          // Σ x over the block's bytes x
    u64 sum_b;          // Σ (m - j)·x_j, m the block's length
    u64 chunk_off;      // offset of the block's IDAT chunk in the file
    u32 adler;          // the image's Adler-32 (its last block only)
    u32 pad;
    u32 hdr[kHdrWords]; // the header bits, LSB first
};
static_assert(sizeof(PngBlock) == IMGPIPE_PNG_REC_BYTES, "PngBlock must match cudastage's scratch layout");

} // namespace png

// PngCrc is the CRC-32 (ISO-HDLC) tables, built by cudastage in Go and passed
// by value: table is the byte-wise table, x2n[k] is x^(2^k) mod P
// (reflected), from which any shift by 8·len bits is a product (zlib's
// x2nmodp).
struct PngCrc {
    u32 table[256];
    u32 x2n[32];
};

namespace png {

// multmodp is a·b modulo the CRC polynomial, reflected (zlib's multmodp, with
// a fixed 32 rounds so that a = 0 cannot loop).
__device__ __forceinline__ u32 multmodp(u32 a, u32 b)
{
    u32 p = 0;
    for (int i = 0; i < 32; i++) {
        if (a & (0x80000000u >> i))
            p ^= b;
        b = (b & 1) ? (b >> 1) ^ 0xedb88320u : b >> 1;
    }
    return p;
}

// x8n is x^(8·n) mod P: the operator that shifts a CRC register past n zero
// bytes.
__device__ __forceinline__ u32 x8n(const PngCrc& crc, u64 n)
{
    u32 p = 0x80000000u;
    for (int k = 3; n != 0; n >>= 1, k++)
        if (n & 1)
            p = multmodp(crc.x2n[k & 31], p);
    return p;
}

__device__ __forceinline__ u32 crc_byte(const u32* table, u32 c, u32 b)
{
    return table[(c ^ b) & 0xffu] ^ (c >> 8);
}

// Img is one image as the encoder sees it.
struct Pic {
    const u8* src;
    int w, h, c, stride;
    u32 rowlen; // 1 + w·c: a filtered row
    u32 n;      // |F| = h·rowlen (< 2^31: cudastage bounds w·h·c)
    int nb;     // blocks
    int g0;     // global index of block 0
};

__device__ __forceinline__ Pic pic_of(const Img& d, const u8* src)
{
    Pic p;
    p.src = src + d.src_off;
    p.w = d.w;
    p.h = d.h;
    p.c = d.c;
    p.stride = d.src_stride;
    p.rowlen = 1u + (u32)d.w * (u32)d.c;
    p.n = p.rowlen * (u32)d.h;
    p.nb = d.tiles_x;
    p.g0 = d.reserved;
    return p;
}

// Blk is what a per-block CTA (plan, pack) knows of its block: the image,
// the block's index k in it, its first byte p0 of F and its length m.
struct Blk {
    Img d;
    Pic p;
    int k, m;
    u32 p0;
    bool last;
};

__device__ __forceinline__ Blk blk_of(const Img* tab, int n, const u8* src)
{
    Blk b;
    b.d = tab[find_image(tab, n)];
    b.p = pic_of(b.d, src);
    b.k = (int)blockIdx.x - b.d.block0;
    b.p0 = (u32)b.k * IMGPIPE_PNG_BLOCK;
    b.m = (int)min((u32)IMGPIPE_PNG_BLOCK, b.p.n - b.p0);
    b.last = b.k == b.p.nb - 1;
    return b;
}

// fill writes F[p0 .. p0+cnt) into fb (§1), 16 consecutive bytes per thread
// per round so that a warp reads contiguous source bytes.
__device__ void fill(const Pic& p, u32 p0, int cnt, u8* fb)
{
    for (int q = threadIdx.x * 16; q < cnt; q += IMGPIPE_THREADS * 16) {
        const u32 pos = p0 + (u32)q;
        u32 y = pos / p.rowlen;
        u32 j = pos - y * p.rowlen;
        const int e = min(16, cnt - q);
        for (int k = 0; k < e; k++) {
            u8 v = 1; // the row's filter type, Sub
            if (j != 0) {
                const u8* row = p.src + (size_t)y * p.stride;
                const int i = (int)j - 1;
                v = (u8)(row[i] - (i >= p.c ? row[i - p.c] : 0));
            }
            fb[q + k] = v;
            if (++j == p.rowlen) {
                j = 0;
                y++;
            }
        }
    }
}

// block_scan returns the exclusive prefix sum of v over the CTA's threads
// and sets *total to the sum. All threads must call it; ws holds kWarps+1
// values.
template <typename T>
__device__ T block_scan(T v, T* ws, T* total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const T y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o)
            x += y;
    }
    if (lane == 31)
        ws[warp] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        T s = 0;
        for (int w = 0; w < kWarps; w++) {
            const T t = ws[w];
            ws[w] = s;
            s += t;
        }
        ws[kWarps] = s;
    }
    __syncthreads();
    const T out = ws[warp] + x - v;
    *total = ws[kWarps];
    __syncthreads(); // ws may be reused at once
    return out;
}

// Bits appends LSB-first bit fields to a zeroed word buffer.
struct Bits {
    u32* w;
    u32 pos;
    __device__ void put(u32 v, int n)
    {
        if (n == 0)
            return;
        const u32 sh = pos & 31;
        w[pos >> 5] |= v << sh;
        if (sh + n > 32)
            w[(pos >> 5) + 1] |= v >> (32 - sh);
        pos += n;
    }
};

// The order of the code-length code's lengths (§4, RFC 1951).
__constant__ u8 kClOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

struct PlanShared {
    u8 fb[kHalf];
    union {
        u32 hist[kWarps][256];
        struct {
            LenWork lw;
            u8 sym[258]; // run-length symbols of §4
            u8 ext[258]; // their extra values
            u32 g[19];   // code-length symbol counts
            u8 cllen[19];
            u32 clcode[19];
            u32 hdr[kHdrWords];
        } b;
    } u;
    u32 f[257];
    u8 litlen[257];
    u32 code[257];
    u64 ws[kWarps + 1];
    int nsym;
};

} // namespace png

// imgpipe_png_plan: one CTA per block (see the top of the file).
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_png_plan(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst,
                 u8* __restrict__ scratch, u8* __restrict__ lens, const __grid_constant__ PngCrc crc)
{
    using namespace png;
    __shared__ __align__(16) PlanShared sh;
    if (n <= 0)
        return;
    const Blk b = blk_of(tab, n, src);
    const Pic& p = b.p;
    const int k = b.k, m = b.m;
    const u32 p0 = b.p0;
    const bool last = b.last;
    const int t = threadIdx.x;

    for (int i = t; i < kWarps * 256; i += IMGPIPE_THREADS)
        (&sh.u.hist[0][0])[i] = 0;
    u64 sa = 0, sb = 0;
    for (int q0 = 0; q0 < m; q0 += kHalf) {
        const int cnt = min(kHalf, m - q0);
        __syncthreads();
        fill(p, p0 + q0, cnt, sh.fb);
        __syncthreads();
        u32* mine = sh.u.hist[t >> 5];
        for (int q = t; q < cnt; q += IMGPIPE_THREADS) {
            const u32 x = sh.fb[q];
            atomicAdd(&mine[x], 1u);
            sa += x;
            sb += (u64)(m - (q0 + q)) * x;
        }
    }
    __syncthreads();
    for (int s = t; s < 256; s += IMGPIPE_THREADS) {
        u32 c = 0;
        for (int w = 0; w < kWarps; w++)
            c += sh.u.hist[w][s];
        sh.f[s] = c;
    }
    if (t == 0)
        sh.f[256] = 1; // end of block
    u64 tot;
    block_scan<u64>(sa, sh.ws, &tot);
    sa = tot;
    block_scan<u64>(sb, sh.ws, &tot); // also orders f and frees hist
    sb = tot;

    lengths(sh.f, 257, 15, sh.litlen, sh.u.b.lw);
    if (t == 0) {
        canonical(sh.litlen, 257, sh.code);
        // §4: run-length code the 257 literal lengths and one distance length 0.
        for (int s = 0; s < 19; s++)
            sh.u.b.g[s] = 0;
        int ns = 0;
        for (int i = 0; i < 258;) {
            const int l = i < 257 ? sh.litlen[i] : 0;
            if (l != 0) {
                sh.u.b.sym[ns] = (u8)l;
                sh.u.b.ext[ns++] = 0;
                sh.u.b.g[l]++;
                i++;
                continue;
            }
            int r = 0;
            while (i + r < 258 && (i + r < 257 ? sh.litlen[i + r] : 0) == 0)
                r++;
            i += r;
            while (r >= 11) {
                const int e = min(r, 138);
                sh.u.b.sym[ns] = 18;
                sh.u.b.ext[ns++] = (u8)(e - 11);
                sh.u.b.g[18]++;
                r -= e;
            }
            if (r >= 3) {
                sh.u.b.sym[ns] = 17;
                sh.u.b.ext[ns++] = (u8)(r - 3);
                sh.u.b.g[17]++;
                r = 0;
            }
            for (; r > 0; r--) {
                sh.u.b.sym[ns] = 0;
                sh.u.b.ext[ns++] = 0;
                sh.u.b.g[0]++;
            }
        }
        sh.nsym = ns;
    }
    __syncthreads();
    lengths(sh.u.b.g, 19, 7, sh.u.b.cllen, sh.u.b.lw);

    png::PngBlock* rec = (png::PngBlock*)scratch + (p.g0 + k);
    for (int s = t; s < 257; s += IMGPIPE_THREADS)
        rec->code[s] = sh.code[s];
    for (int i = t; i < kHdrWords; i += IMGPIPE_THREADS)
        sh.u.b.hdr[i] = 0;
    __syncthreads();
    if (t == 0) {
        canonical(sh.u.b.cllen, 19, sh.u.b.clcode);
        Bits bw{sh.u.b.hdr, 0};
        bw.put(last ? 1 : 0, 1); // BFINAL
        bw.put(2, 2);            // BTYPE: dynamic Huffman
        bw.put(0, 5);            // HLIT: 257 codes
        bw.put(0, 5);            // HDIST: 1 code
        int ncl = 4;
        for (int i = 0; i < 19; i++)
            if (sh.u.b.cllen[kClOrder[i]] != 0)
                ncl = max(ncl, i + 1);
        bw.put(ncl - 4, 4);
        for (int i = 0; i < ncl; i++)
            bw.put(sh.u.b.cllen[kClOrder[i]], 3);
        for (int i = 0; i < sh.nsym; i++) {
            const int s = sh.u.b.sym[i];
            const u32 c = sh.u.b.clcode[s];
            bw.put(c & 0xffffu, (int)(c >> 16));
            if (s == 17)
                bw.put(sh.u.b.ext[i], 3);
            else if (s == 18)
                bw.put(sh.u.b.ext[i], 7);
        }
        u64 bits = bw.pos;
        for (int s = 0; s < 257; s++)
            bits += (u64)sh.f[s] * (sh.code[s] >> 16);
        rec->hdr_bits = bw.pos;
        rec->bits = (u32)bits;
        rec->nbytes = last ? (u32)((bits + 7) / 8) : (u32)((bits + 3 + 7) / 8) + 4;
        rec->sum_a = sa;
        rec->sum_b = sb;
    }
    __syncthreads();
    for (int i = t; i < kHdrWords; i += IMGPIPE_THREADS)
        rec->hdr[i] = sh.u.b.hdr[i];
}

namespace png {

__device__ __forceinline__ void put_be32(u8* p, u32 v)
{
    p[0] = (u8)(v >> 24);
    p[1] = (u8)(v >> 16);
    p[2] = (u8)(v >> 8);
    p[3] = (u8)v;
}

} // namespace png

// imgpipe_png_layout: one CTA per image (see the top of the file).
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_png_layout(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst,
                   u8* __restrict__ scratch, u8* __restrict__ lens, const __grid_constant__ PngCrc crc)
{
    using namespace png;
    __shared__ u64 ws[kWarps + 1];
    if (n <= 0)
        return;
    const int i = find_image(tab, n);
    const Img d = tab[i];
    const Pic p = pic_of(d, src);
    PngBlock* rec = (PngBlock*)scratch + p.g0;
    const int t = threadIdx.x;
    u64 carry = 33; // signature and IHDR
    u64 ta = 0, tb = 0;
    for (int base = 0; base < p.nb; base += IMGPIPE_THREADS) {
        const int k = base + t;
        u64 size = 0;
        if (k < p.nb) {
            const u32 datalen = rec[k].nbytes + (k == 0 ? 2 : 0) + (k == p.nb - 1 ? 4 : 0);
            size = 12 + (u64)datalen;
            const u32 pk = (u32)k * IMGPIPE_PNG_BLOCK;
            const u32 mk = min((u32)IMGPIPE_PNG_BLOCK, p.n - pk);
            const u64 a = rec[k].sum_a % kAdlerMod;
            ta += a;
            tb += (rec[k].sum_b % kAdlerMod + (u64)((p.n - pk - mk) % kAdlerMod) * a) % kAdlerMod;
        }
        u64 total;
        const u64 off = block_scan<u64>(size, ws, &total);
        if (k < p.nb)
            rec[k].chunk_off = carry + off;
        carry += total;
    }
    u64 total;
    block_scan<u64>(ta, ws, &total);
    ta = total;
    block_scan<u64>(tb, ws, &total);
    tb = total;
    if (t != 0)
        return;
    const u32 adler = (u32)(((u64)p.n + tb) % kAdlerMod) << 16 | (u32)((1 + ta) % kAdlerMod);
    rec[p.nb - 1].adler = adler;
    const u64 size = carry + 12;
    u8* f = dst + d.dst_off;
    const u8 head[16] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    for (int j = 0; j < 16; j++)
        f[j] = head[j];
    put_be32(f + 16, (u32)p.w);
    put_be32(f + 20, (u32)p.h);
    f[24] = 8;                    // bit depth
    f[25] = p.c == 1 ? 0 : 2;     // colour type: gray or RGB
    f[26] = f[27] = f[28] = 0;    // compression, filter, interlace
    u32 c = 0xffffffffu;
    for (int j = 12; j < 29; j++)
        c = crc_byte(crc.table, c, f[j]);
    put_be32(f + 29, ~c);
    const u8 iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    for (int j = 0; j < 12; j++)
        f[carry + j] = iend[j];
    u8* l = lens + 4 * (size_t)i; // little-endian, byte by byte: lens may be unaligned
    l[0] = (u8)size;
    l[1] = (u8)(size >> 8);
    l[2] = (u8)(size >> 16);
    l[3] = (u8)(size >> 24);
}

namespace png {

// emit writes word w of a thread's bit stream: plain stores for words the
// thread alone writes, atomicOr for a word it shares with a neighbour (its
// first and last), which png_pack zeroed first.
__device__ __forceinline__ void emit(u32* st, u32 w, u32 v, bool shared)
{
    if (shared)
        atomicOr(&st[w], v);
    else
        st[w] = v;
}

struct PackShared {
    u8 fb[kHalf];
    u32 code[257];
    u32 crcs[IMGPIPE_THREADS];
    u32 table[256];
    u32 ws[kWarps + 1];
};

} // namespace png

// imgpipe_png_pack: one CTA per block (see the top of the file).
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_png_pack(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst,
                 u8* __restrict__ scratch, u8* __restrict__ lens, const __grid_constant__ PngCrc crc)
{
    using namespace png;
    __shared__ __align__(16) PackShared sh;
    if (n <= 0)
        return;
    const Blk b = blk_of(tab, n, src);
    const Pic& p = b.p;
    const int k = b.k, m = b.m;
    const u32 p0 = b.p0;
    const bool last = b.last;
    const int t = threadIdx.x;
    const Img& e = tab[n - 1];
    const size_t nbAll = (size_t)e.reserved + (size_t)e.tiles_x;
    const PngBlock* rec = (const PngBlock*)scratch + (p.g0 + k);
    u32* st = (u32*)(scratch + nbAll * IMGPIPE_PNG_REC_BYTES + (size_t)(p.g0 + k) * IMGPIPE_PNG_STAGE_BYTES);

    for (int s = t; s < 257; s += IMGPIPE_THREADS)
        sh.code[s] = rec->code[s];
    for (int s = t; s < 256; s += IMGPIPE_THREADS)
        sh.table[s] = crc.table[s];
    const u32 bits = rec->bits, hb = rec->hdr_bits;
    const u32 hw = (hb + 31) / 32;
    for (u32 w = t; w < (bits + 31) / 32; w += IMGPIPE_THREADS)
        st[w] = w < hw ? rec->hdr[w] : 0; // the header's last word is shared with thread 0's codes
    u32 base = hb;
    for (int q0 = 0; q0 < m; q0 += kHalf) {
        const int cnt = min(kHalf, m - q0);
        __syncthreads();
        fill(p, p0 + q0, cnt, sh.fb);
        __syncthreads();
        const int lo = min(t * kSeg, cnt), hi = min(lo + kSeg, cnt);
        u32 nbits = 0;
        for (int q = lo; q < hi; q++)
            nbits += sh.code[sh.fb[q]] >> 16;
        u32 total;
        const u32 start = base + block_scan<u32>(nbits, sh.ws, &total);
        if (hi > lo) {
            u64 acc = 0;
            int nacc = start & 31;
            u32 w = start >> 5;
            bool first = true;
            for (int q = lo; q < hi; q++) {
                const u32 v = sh.code[sh.fb[q]];
                acc |= (u64)(v & 0xffffu) << nacc;
                nacc += (int)(v >> 16);
                if (nacc >= 32) {
                    emit(st, w++, (u32)acc, first);
                    first = false;
                    acc >>= 32;
                    nacc -= 32;
                }
            }
            if (nacc > 0)
                emit(st, w, (u32)acc, true);
        }
        base += total;
    }
    if (t == 0) { // the end-of-block code, at bits - its length
        const u32 v = sh.code[256];
        const u32 l = v >> 16, pos = base, sh5 = pos & 31;
        atomicOr(&st[pos >> 5], (v & 0xffffu) << sh5);
        if (sh5 + l > 32)
            atomicOr(&st[(pos >> 5) + 1], (v & 0xffffu) >> (32 - sh5));
    }
    __syncthreads();

    // The chunk: length, "IDAT", data, CRC. Data is the zlib header (block 0),
    // the block's bytes, the Adler-32 (last block).
    const u32 pre = k == 0 ? 2 : 0;
    const u32 nbytes = rec->nbytes, tbytes = (bits + 7) / 8;
    const u32 datalen = pre + nbytes + (last ? 4 : 0);
    const u32 adler = last ? rec->adler : 0;
    u8* chunk = dst + b.d.dst_off + rec->chunk_off;
    const u8* sb = (const u8*)st;
    // Segments of seg bytes aligned to the data's end: the first ones are
    // short or empty, which for a CRC register starting at 0 is the same as
    // leading zero bytes, so every segment counts as seg bytes when combined.
    const u32 seg = (datalen + IMGPIPE_THREADS - 1) / IMGPIPE_THREADS;
    const long long end = (long long)datalen - (long long)(IMGPIPE_THREADS - 1 - t) * seg;
    const u32 qhi = (u32)max(0LL, end), qlo = (u32)max(0LL, end - (long long)seg);
    u32 c = 0;
    for (u32 q = qlo; q < qhi; q++) {
        u32 b;
        if (q < pre) {
            b = q == 0 ? 0x78 : 0x01;
        } else if (q - pre < tbytes) {
            b = sb[q - pre];
        } else if (q - pre < nbytes) {
            b = q - pre >= nbytes - 2 ? 0xff : 0; // alignment zeros, then 00 00 FF FF
        } else {
            b = (adler >> (8 * (3 - (q - pre - nbytes)))) & 0xffu;
        }
        chunk[8 + q] = (u8)b;
        c = crc_byte(sh.table, c, b);
    }
    sh.crcs[t] = c;
    __syncthreads();
    u32 mul = x8n(crc, seg);
    for (int s = 1; s < IMGPIPE_THREADS; s <<= 1) {
        if ((t & (2 * s - 1)) == 0)
            sh.crcs[t] = multmodp(mul, sh.crcs[t]) ^ sh.crcs[t + s];
        mul = multmodp(mul, mul);
        __syncthreads();
    }
    if (t == 0) {
        const u8 type[4] = {'I', 'D', 'A', 'T'};
        u32 r = 0xffffffffu;
        for (int j = 0; j < 4; j++) {
            r = crc_byte(sh.table, r, type[j]);
            chunk[4 + j] = type[j];
        }
        r = multmodp(x8n(crc, datalen), r) ^ sh.crcs[0];
        put_be32(chunk, datalen);
        put_be32(chunk + 8 + datalen, ~r);
    }
}
