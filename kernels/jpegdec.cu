// jpegdec.cu: baseline JPEG decoding on CUDA cores that gives libjpeg-turbo's bytes (its accurate
// integer IDCT, DCT scaling, fancy upsampling and YCbCr->RGB), for the CUDA device's "turbo-cuda"
// file decoder. Package cudastage/jpegdec parses each file on the host (tables, unstuffed scan);
// package cudastage builds the tables below and runs the passes in this order:
//
//  1. jpeg_sync, in rounds. The entropy-coded data of each restart segment is cut into
//     subsequences of IMGPIPE_JPEG_SUB_BITS bits, one thread each. Round 0 decodes every subsequence from
//     its first bit as if a block began there; each later round re-decodes, from its
//     predecessor's exit state, only the subsequences whose predecessor's exit moved. Huffman
//     codes resynchronise within a few hundred bits, so after two or three rounds no exit state
//     moves and every subsequence knows the exact state (bit, block slot, coefficient) it starts
//     in. The host stops after jpegMaxRounds rounds (package cudastage); jpeg_mark then hands any segment that has
//     not settled to jpeg_serial.
//  2. jpeg_count: each subsequence counts the blocks it begins and sums their DC differences.
//  3. jpeg_scan: per segment, the counts become each subsequence's first block and DC predictors.
//  4. jpeg_write: each subsequence decodes its coefficients into the blocks; jpeg_serial decodes
//     the unsettled segments from their start, one thread each (slow, but exact).
//  5. jpeg_idct: one thread per block, the IDCT of the component's scaled size.
//  6. jpeg_rgb: one thread per output pixel: upsampling and colour conversion.
//
// Everything is integer arithmetic transcribed from libjpeg-turbo (jidctint.c, jidctred.c,
// jdsample.c, jdcolor.c, jdmaster.c, jdhuff.c), so the result is the library's own, bit for bit.
#include "common.cuh"

#define IMGPIPE_JPEG_SUB_BITS 2048 // subsequence length, bits

// JImg is one image of a call (mirrored in Go by jpegImg; 1080 bytes).
struct JImg {
    int w, h, nc, mx, my, ri, nseg, hmax, vmax, bpm;
    int slotc[10];                         // the component of each block of an MCU
    int hs[3], vs[3], dct[3], act[3];      // sampling factors; Huffman tables (indexes in tab)
    int min, ow, oh, gray;                 // DCT size of the largest component; output size; grayscale
    int ss[3], dw[3], dh[3], pw[3], ph[3]; // per component: IDCT size, real and plane sizes in samples
    int up[3], he[3], ve[3];               // upsampler, and its factors for JPEG_UP_INT
    int pad[2];
    long long blk0, nblk, rgb0, nrgb;      // first block in coef and count; first jpeg_rgb block and count
    long long poff[3], out;                // plane offsets in planes; the output's device address
    int qt[3][64];                         // quantisation tables, natural order
};

// JTab is one Huffman table (mirrored by jpegdec.Table).
struct JTab {
    u16 lut[512];
    int maxcode[18], valoff[18];
    u8 vals[256];
};

// JSeg is one restart segment (mirrored by jpegSeg): bits [start, end) of w.
struct JSeg {
    long long start, end, sub0, blk0, blocks;
    int img, nsub;
};

// JSt is a decoder state at a symbol boundary: sk = slot in the MCU << 8 | coefficient index.
struct JSt {
    long long pos;
    int sk, pad;
};

// JCtx is one call's tables, all in one device allocation (mirrored by jpegCtx).
struct JCtx {
    const JImg* im;
    const JTab* tab;
    const u32* w; // the unstuffed scans (see jpeg_peek)
    const JSeg* segs;
    const int* subseg;
    JSt* E[2];
    u8* ch[2];
    int* cnt;
    int* sums;
    long long* blk;
    int* pred;
    short* coef;
    int* bad;                 // per image: IMGPIPE_JPEG_BAD_SHORT when a segment ends early
    unsigned long long* badpos; // per image: the first bad Huffman code's bit, or ~0
    u8* segslow; // per segment: 1 when jpeg_serial decodes it, | 2 once its last block is decoded
    u8* planes;
    int* flag;
    long long nw, nsub, nseg, nimg, nblk, nrgb;
};

#define IMGPIPE_JPEG_BAD_SHORT 2 // a segment ends before its blocks: "premature end of data segment"

enum { JPEG_UP_FULL, JPEG_UP_H2V1F, JPEG_UP_H2V1, JPEG_UP_H1V2F, JPEG_UP_H2V2F, JPEG_UP_H2V2, JPEG_UP_INT };

__constant__ u8 jpeg_zz[64] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

// jpeg_peek returns the 32 bits of the stream from bit pos, most significant first (zeros past
// the end, as libjpeg feeds them). The stream is bytes; w is it as 4-byte words (nw of them,
// the last one zero-padded), read little-endian and swapped.
__device__ __forceinline__ u32 jpeg_peek(const u32* w, long long pos, long long nw)
{
    const long long i = pos >> 5;
    const int sh = (int)(pos & 31);
    const u32 hi = i < nw ? __byte_perm(w[i], 0, 0x0123) : 0;
    const u32 lo = i + 1 < nw ? __byte_perm(w[i + 1], 0, 0x0123) : 0;
    return sh ? (hi << sh) | (lo >> (32 - sh)) : hi;
}

// jpeg_huff returns length << 8 | symbol of the code at the top of p, or 0 for no code (jdhuff.c).
__device__ __forceinline__ int jpeg_huff(const JTab* t, u32 p)
{
    const int e = t->lut[p >> 23];
    if (e)
        return e;
    for (int l = 10; l <= 16; l++) {
        const int code = (int)(p >> (32 - l));
        if (code <= t->maxcode[l])
            return (l << 8) | t->vals[(t->valoff[l] + code) & 255];
    }
    return 0;
}

__device__ __forceinline__ int jpeg_extend(u32 v, int s)
{
    return (int)v < (1 << (s - 1)) ? (int)v - (1 << s) + 1 : (int)v;
}

// The visitors of jpeg_run: what a pass does with the symbols it decodes.
struct JNoV {
    __device__ bool more() const { return true; }
    __device__ void dc(int, int) {}
    __device__ void ac(int, int) {}
    __device__ void blockend(long long) {}
};
struct JCountV {
    int n = 0, sum[3] = {0, 0, 0};
    __device__ bool more() const { return true; }
    __device__ void dc(int c, int d) { n++; sum[c] += d; }
    __device__ void ac(int, int) {}
    __device__ void blockend(long long) {}
};
// JWriteV writes coefficients, within its segment's blocks only (a subsequence that starts in
// junk after the last block must write nothing), and notes where the last block ends.
struct JWriteV {
    short* coef;
    long long blk, end; // the block being written; the segment's end
    int pred[3];
    long long done = -1; // the bit after the segment's last block, once decoded
    __device__ bool more() const { return blk + 1 < end; }
    __device__ void dc(int c, int d) { blk++; pred[c] += d; coef[blk * 64] = (short)pred[c]; }
    __device__ void ac(int k, int v) { if (blk >= 0 && blk < end) coef[blk * 64 + jpeg_zz[k]] = (short)v; }
    __device__ void blockend(long long pos) { if (blk == end - 1) done = pos; }
};

// jpeg_run decodes image g's stream from st until the position reaches stop or v.more() refuses a
// new block, leaving the exit state in st; it returns the bit of the first bad code it met, or -1.
// A bad code reads as libjpeg-turbo's fast path reads it: 17 bits, symbol 0 (only a subsequence
// not yet synchronised meets one in a sound file). A run past coefficient 63 writes coefficient 63
// and ends the block, as libjpeg's padded natural-order table does.
template <class V>
__device__ long long jpeg_run(const JImg* g, const JTab* tab, const u32* w, long long nw, JSt& st, long long stop, V& v)
{
    int slot = st.sk >> 8, k = st.sk & 255, c = g->slotc[slot];
    long long bad = -1;
    long long pos = st.pos;
    while (pos < stop) {
        const u32 p = jpeg_peek(w, pos, nw);
        if (k == 0) {
            if (!v.more())
                break;
            int e = jpeg_huff(tab + g->dct[c], p);
            if (!e) {
                bad = bad < 0 ? pos : bad;
                e = 17 << 8;
            }
            const int len = e >> 8, s = e & 15;
            v.dc(c, s ? jpeg_extend((p << len) >> (32 - s), s) : 0);
            pos += len + s;
            k = 1;
            continue;
        }
        int e = jpeg_huff(tab + g->act[c], p);
        if (!e) {
            bad = bad < 0 ? pos : bad;
            e = 17 << 8;
        }
        const int len = e >> 8, r = (e >> 4) & 15, s = e & 15;
        if (s) {
            k += r;
            v.ac(k > 63 ? 63 : k, jpeg_extend((p << len) >> (32 - s), s));
            k++;
        } else if (r == 15) {
            k += 16;
        } else {
            k = 64;
        }
        pos += len + s;
        if (k >= 64) {
            v.blockend(pos);
            k = 0;
            slot = slot + 1 == g->bpm ? 0 : slot + 1;
            c = g->slotc[slot];
        }
    }
    st.pos = pos;
    st.sk = slot << 8 | k;
    return bad;
}

// jpeg_entry gives subsequence t's start state (exact for a segment's first) and its end.
__device__ __forceinline__ void jpeg_entry(const JCtx& x, long long t, int guess, const JSt* E, const JSeg& s, JSt& st, long long& stop)
{
    const int l = (int)(t - s.sub0);
    const long long a = s.start + (long long)l * IMGPIPE_JPEG_SUB_BITS;
    stop = l == s.nsub - 1 ? s.end : a + IMGPIPE_JPEG_SUB_BITS;
    if (l == 0) { st.pos = s.start; st.sk = 0; }
    else if (guess) { st.pos = a; st.sk = 0; }
    else st = E[t - 1];
}

// jpeg_sync is one synchronisation round (see the file comment); it raises *flag when an exit moved.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS) jpeg_sync(const JCtx* __restrict__ xp, int round)
{
    const JCtx& x = *xp;
    const long long t = (long long)blockIdx.x * IMGPIPE_THREADS + threadIdx.x;
    if (t >= x.nsub)
        return;
    const JSt* Eold = x.E[round & 1];
    JSt* Enew = x.E[(round + 1) & 1];
    u8* chnew = x.ch[(round + 1) & 1];
    const JSeg& s = x.segs[x.subseg[t]];
    if (round > 0 && (t == s.sub0 || !x.ch[round & 1][t - 1])) {
        Enew[t] = Eold[t];
        chnew[t] = 0;
        return;
    }
    JSt st;
    long long stop;
    jpeg_entry(x, t, round == 0, Eold, s, st, stop);
    JNoV v;
    jpeg_run(x.im + s.img, x.tab, x.w, x.nw, st, stop, v);
    Enew[t] = st;
    const int moved = round == 0 || st.pos != Eold[t].pos || st.sk != Eold[t].sk;
    chnew[t] = (u8)moved;
    if (moved)
        *x.flag = 1;
}

// jpeg_mark hands to jpeg_serial every segment with a subsequence whose exit still moved in the
// last round (ch is that round's flags).
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS) jpeg_mark(const JCtx* __restrict__ xp, int round)
{
    const JCtx& x = *xp;
    const long long t = (long long)blockIdx.x * IMGPIPE_THREADS + threadIdx.x;
    if (t < x.nsub && x.ch[round & 1][t])
        x.segslow[x.subseg[t]] = 1;
}

// jpeg_settled gives this thread's subsequence t, its segment, its settled start state and its
// end; false past the last subsequence or in a segment that jpeg_serial decodes.
__device__ __forceinline__ bool jpeg_settled(const JCtx& x, int round, long long& t, const JSeg*& s, JSt& st, long long& stop)
{
    t = (long long)blockIdx.x * IMGPIPE_THREADS + threadIdx.x;
    if (t >= x.nsub || (x.segslow[x.subseg[t]] & 1))
        return false;
    s = &x.segs[x.subseg[t]];
    jpeg_entry(x, t, 0, x.E[round & 1], *s, st, stop);
    return true;
}

// jpeg_count counts the blocks each subsequence begins and sums their DC differences.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS) jpeg_count(const JCtx* __restrict__ xp, int round)
{
    const JCtx& x = *xp;
    long long t, stop;
    const JSeg* sp;
    JSt st;
    if (!jpeg_settled(x, round, t, sp, st, stop))
        return;
    const JSeg& s = *sp;
    JCountV v;
    jpeg_run(x.im + s.img, x.tab, x.w, x.nw, st, stop, v);
    x.cnt[t] = v.n;
    for (int c = 0; c < 3; c++)
        x.sums[t * 3 + c] = v.sum[c];
}

// jpeg_scan turns each segment's counts into its subsequences' first blocks and DC predictors:
// one warp per segment, scanning its subsequences 32 at a time (a photo without restart markers
// is one segment of thousands). Past the subsequence where the last block begins and the next
// one (a block spans at most two: 64 codes of at most 27 bits are fewer than
// IMGPIPE_JPEG_SUB_BITS), a subsequence decodes only junk after the segment's data: it gets the
// end as its block, so it writes nothing. The blocks begun before t only grow with t, so that is
// "the blocks begun up to t - 2 reach the last one".
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS) jpeg_scan(const JCtx* __restrict__ xp)
{
    const JCtx& x = *xp;
    const long long i = ((long long)blockIdx.x * IMGPIPE_THREADS + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (i >= x.nseg || (x.segslow[i] & 1))
        return; // the whole warp: one segment
    const JSeg& s = x.segs[i];
    const long long end = s.blk0 + s.blocks;
    const long long none = -(1LL << 62); // no subsequence two back
    long long b = s.blk0 - 1, back1 = none, back2 = none; // back: blocks begun up to t - 1, t - 2
    int p[3] = {0, 0, 0};
    for (long long t0 = s.sub0; t0 < s.sub0 + s.nsub; t0 += 32) {
        const long long t = t0 + lane;
        const bool in = t < s.sub0 + s.nsub;
        long long n = in ? x.cnt[t] : 0;
        int v[3];
        for (int c = 0; c < 3; c++)
            v[c] = in ? x.sums[t * 3 + c] : 0;
        // inclusive warp scans
        long long incl = n;
        int iv[3] = {v[0], v[1], v[2]};
        for (int d = 1; d < 32; d <<= 1) {
            const long long o = __shfl_up_sync(0xffffffffu, incl, d);
            int ov[3];
            for (int c = 0; c < 3; c++)
                ov[c] = __shfl_up_sync(0xffffffffu, iv[c], d);
            if (lane >= d) {
                incl += o;
                for (int c = 0; c < 3; c++)
                    iv[c] += ov[c];
            }
        }
        const long long upto = b + incl; // the last block begun in subsequences up to t
        long long two = __shfl_up_sync(0xffffffffu, upto, 2);
        if (lane < 2)
            two = lane == 0 ? back2 : back1;
        if (in) {
            x.blk[t] = two >= end - 1 ? end : upto - n;
            for (int c = 0; c < 3; c++)
                x.pred[t * 3 + c] = p[c] + iv[c] - v[c];
        }
        back1 = __shfl_sync(0xffffffffu, upto, 31);
        back2 = __shfl_sync(0xffffffffu, upto, 30);
        b = back1;
        for (int c = 0; c < 3; c++)
            p[c] += __shfl_sync(0xffffffffu, iv[c], 31);
    }
}

// jpeg_badcode keeps the image's first bad code.
__device__ __forceinline__ void jpeg_badcode(const JCtx& x, const JSeg& s, long long bad)
{
    if (bad >= 0)
        atomicMin(&x.badpos[s.img], (unsigned long long)bad);
}

// jpeg_done marks segment i complete when its last block ended within its bits.
__device__ __forceinline__ void jpeg_done(const JCtx& x, long long i, const JSeg& s, const JWriteV& v)
{
    if (v.done >= 0 && v.done <= s.end)
        x.segslow[i] |= 2;
}

// jpeg_write decodes each subsequence's coefficients into its blocks.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS) jpeg_write(const JCtx* __restrict__ xp, int round)
{
    const JCtx& x = *xp;
    long long t, stop;
    const JSeg* sp;
    JSt st;
    if (!jpeg_settled(x, round, t, sp, st, stop))
        return;
    const JSeg& s = *sp;
    JWriteV v;
    v.coef = x.coef;
    v.blk = x.blk[t];
    v.end = s.blk0 + s.blocks;
    for (int c = 0; c < 3; c++)
        v.pred[c] = x.pred[t * 3 + c];
    jpeg_badcode(x, s, jpeg_run(x.im + s.img, x.tab, x.w, x.nw, st, stop, v));
    jpeg_done(x, x.subseg[t], s, v); // only the subsequence that decodes the last block can
}

// jpeg_serial decodes each segment that did not settle from its start, one thread per segment,
// then fails the image of every segment whose last block was not decoded within its bits
// ("premature end of data segment").
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS) jpeg_serial(const JCtx* __restrict__ xp)
{
    const JCtx& x = *xp;
    const long long i = (long long)blockIdx.x * IMGPIPE_THREADS + threadIdx.x;
    if (i >= x.nseg)
        return;
    const JSeg& s = x.segs[i];
    if (x.segslow[i] & 1) {
        JSt st;
        st.pos = s.start;
        st.sk = 0;
        JWriteV v;
        v.coef = x.coef;
        v.blk = s.blk0 - 1;
        v.end = s.blk0 + s.blocks;
        v.pred[0] = v.pred[1] = v.pred[2] = 0;
        jpeg_badcode(x, s, jpeg_run(x.im + s.img, x.tab, x.w, x.nw, st, s.end, v));
        jpeg_done(x, i, s, v);
    }
    if (!(x.segslow[i] & 2))
        atomicOr(&x.bad[s.img], IMGPIPE_JPEG_BAD_SHORT);
}

#define JPEG_CONST_BITS 13 // jidctint.c's CONST_BITS

__device__ __forceinline__ u8 jpeg_clamp(long long v) { return v < 0 ? 0 : v > 255 ? 255 : (u8)v; }
// jpeg_wrap is libjpeg's post-IDCT range-limit table (v descaled and centred), which only the C
// 1x1 IDCT uses; the SIMD IDCTs of x86-64 saturate (jpeg_clamp).
__device__ __forceinline__ u8 jpeg_wrap(long long v)
{
    const int i = (int)(v & 1023);
    return i < 128 ? i + 128 : i < 512 ? 255 : i < 896 ? 0 : i - 896;
}
#define JPEG_DESCALE(x, n) (((x) + (1LL << ((n) - 1))) >> (n))

// jpeg_islow_even is jidctint.c's even part of one 8-point pass: from inputs 0, 2, 4, 6 (scaled
// by 2^JPEG_CONST_BITS) its tmp10..tmp13.
__device__ __forceinline__ void jpeg_islow_even(long long e0, long long e2, long long e4, long long e6,
                                                long long& t10, long long& t11, long long& t12, long long& t13)
{
    const long long z1 = (e2 + e6) * 4433, t2 = z1 + e6 * -15137, t3 = z1 + e2 * 6270;
    const long long t0 = (e0 + e4) * (1 << JPEG_CONST_BITS), t1 = (e0 - e4) * (1 << JPEG_CONST_BITS);
    t10 = t0 + t3; t13 = t0 - t3; t11 = t1 + t2; t12 = t1 - t2;
}

// jpeg_islow_odd is jidctint.c's odd part of one 8-point pass: inputs 7, 5, 3, 1 in t0..t3
// become its tmp0..tmp3.
__device__ __forceinline__ void jpeg_islow_odd(long long& t0, long long& t1, long long& t2, long long& t3)
{
    long long z1 = t0 + t3, z2 = t1 + t2, z3 = t0 + t2, z4 = t1 + t3;
    const long long z5 = (z3 + z4) * 9633;
    t0 *= 2446; t1 *= 16819; t2 *= 25172; t3 *= 12299;
    z1 *= -7373; z2 *= -20995; z3 *= -16069; z4 *= -3196;
    z3 += z5; z4 += z5;
    t0 += z1 + z3; t1 += z2 + z4; t2 += z2 + z3; t3 += z1 + z4;
}

// jpeg_idct_block writes the ss x ss samples of one block (coefficients in natural order).
__device__ void jpeg_idct_block(const short* in, const int* q, int ss, u8* out, int stride)
{
    const int CB = JPEG_CONST_BITS, P1 = 2;
    if (ss == 1) {
        out[0] = jpeg_wrap(JPEG_DESCALE((long long)in[0] * q[0], 3));
        return;
    }
    int ws[64];
    if (ss == 8) { // jpeg_idct_islow
        for (int c = 0; c < 8; c++) {
            const short* p = in + c;
            const int* qq = q + c;
            int* w = ws + c;
            if (!p[8] && !p[16] && !p[24] && !p[32] && !p[40] && !p[48] && !p[56]) {
                const int dc = (p[0] * qq[0]) * (1 << P1);
                for (int r = 0; r < 8; r++)
                    w[r * 8] = dc;
                continue;
            }
            long long t10, t11, t12, t13;
            jpeg_islow_even(p[0] * qq[0], p[16] * qq[16], p[32] * qq[32], p[48] * qq[48], t10, t11, t12, t13);
            long long t0 = p[56] * qq[56], t1 = p[40] * qq[40], t2 = p[24] * qq[24], t3 = p[8] * qq[8];
            jpeg_islow_odd(t0, t1, t2, t3);
            w[0] = (int)JPEG_DESCALE(t10 + t3, CB - P1); w[56] = (int)JPEG_DESCALE(t10 - t3, CB - P1);
            w[8] = (int)JPEG_DESCALE(t11 + t2, CB - P1); w[48] = (int)JPEG_DESCALE(t11 - t2, CB - P1);
            w[16] = (int)JPEG_DESCALE(t12 + t1, CB - P1); w[40] = (int)JPEG_DESCALE(t12 - t1, CB - P1);
            w[24] = (int)JPEG_DESCALE(t13 + t0, CB - P1); w[32] = (int)JPEG_DESCALE(t13 - t0, CB - P1);
        }
        for (int r = 0; r < 8; r++) {
            const int* w = ws + r * 8;
            u8* o = out + r * stride;
            if (!w[1] && !w[2] && !w[3] && !w[4] && !w[5] && !w[6] && !w[7]) {
                const u8 v = jpeg_clamp(JPEG_DESCALE((long long)w[0], P1 + 3) + 128);
                for (int k = 0; k < 8; k++)
                    o[k] = v;
                continue;
            }
            long long t10, t11, t12, t13;
            jpeg_islow_even(w[0], w[2], w[4], w[6], t10, t11, t12, t13);
            long long t0 = w[7], t1 = w[5], t2 = w[3], t3 = w[1];
            jpeg_islow_odd(t0, t1, t2, t3);
            const int S = CB + P1 + 3;
            o[0] = jpeg_clamp(JPEG_DESCALE(t10 + t3, S) + 128); o[7] = jpeg_clamp(JPEG_DESCALE(t10 - t3, S) + 128);
            o[1] = jpeg_clamp(JPEG_DESCALE(t11 + t2, S) + 128); o[6] = jpeg_clamp(JPEG_DESCALE(t11 - t2, S) + 128);
            o[2] = jpeg_clamp(JPEG_DESCALE(t12 + t1, S) + 128); o[5] = jpeg_clamp(JPEG_DESCALE(t12 - t1, S) + 128);
            o[3] = jpeg_clamp(JPEG_DESCALE(t13 + t0, S) + 128); o[4] = jpeg_clamp(JPEG_DESCALE(t13 - t0, S) + 128);
        }
        return;
    }
    if (ss == 4) { // jpeg_idct_4x4
        for (int c = 0; c < 8; c++) {
            if (c == 4)
                continue;
            const short* p = in + c;
            const int* qq = q + c;
            int* w = ws + c;
            if (!p[8] && !p[16] && !p[24] && !p[40] && !p[48] && !p[56]) {
                const int dc = (p[0] * qq[0]) * (1 << P1);
                for (int r = 0; r < 4; r++)
                    w[r * 8] = dc;
                continue;
            }
            long long t0 = (long long)(p[0] * qq[0]) * (1 << (CB + 1));
            long long z2 = p[16] * qq[16], z3 = p[48] * qq[48];
            long long t2 = z2 * 15137 + z3 * -6270;
            const long long t10 = t0 + t2, t12 = t0 - t2;
            const long long z1 = p[56] * qq[56];
            z2 = p[40] * qq[40]; z3 = p[24] * qq[24];
            const long long z4 = p[8] * qq[8];
            t0 = z1 * -1730 + z2 * 11893 + z3 * -17799 + z4 * 8697;
            t2 = z1 * -4176 + z2 * -4926 + z3 * 7373 + z4 * 20995;
            w[0] = (int)JPEG_DESCALE(t10 + t2, CB - P1 + 1); w[24] = (int)JPEG_DESCALE(t10 - t2, CB - P1 + 1);
            w[8] = (int)JPEG_DESCALE(t12 + t0, CB - P1 + 1); w[16] = (int)JPEG_DESCALE(t12 - t0, CB - P1 + 1);
        }
        for (int r = 0; r < 4; r++) {
            const int* w = ws + r * 8;
            u8* o = out + r * stride;
            if (!w[1] && !w[2] && !w[3] && !w[5] && !w[6] && !w[7]) {
                const u8 v = jpeg_clamp(JPEG_DESCALE((long long)w[0], P1 + 3) + 128);
                for (int k = 0; k < 4; k++)
                    o[k] = v;
                continue;
            }
            long long t0 = (long long)w[0] * (1 << (CB + 1));
            long long t2 = (long long)w[2] * 15137 + (long long)w[6] * -6270;
            const long long t10 = t0 + t2, t12 = t0 - t2;
            const long long z1 = w[7], z2 = w[5], z3 = w[3], z4 = w[1];
            t0 = z1 * -1730 + z2 * 11893 + z3 * -17799 + z4 * 8697;
            t2 = z1 * -4176 + z2 * -4926 + z3 * 7373 + z4 * 20995;
            const int S = CB + P1 + 3 + 1;
            o[0] = jpeg_clamp(JPEG_DESCALE(t10 + t2, S) + 128); o[3] = jpeg_clamp(JPEG_DESCALE(t10 - t2, S) + 128);
            o[1] = jpeg_clamp(JPEG_DESCALE(t12 + t0, S) + 128); o[2] = jpeg_clamp(JPEG_DESCALE(t12 - t0, S) + 128);
        }
        return;
    }
    for (int c = 0; c < 8; c++) { // ss == 2: jpeg_idct_2x2
        if (c == 2 || c == 4 || c == 6)
            continue;
        const short* p = in + c;
        const int* qq = q + c;
        int* w = ws + c;
        if (!p[8] && !p[24] && !p[40] && !p[56]) {
            const int dc = (p[0] * qq[0]) * (1 << P1);
            w[0] = w[8] = dc;
            continue;
        }
        const long long t10 = (long long)(p[0] * qq[0]) * (1 << (CB + 2));
        const long long t0 = (long long)(p[56] * qq[56]) * -5906 + (long long)(p[40] * qq[40]) * 6967 +
                             (long long)(p[24] * qq[24]) * -10426 + (long long)(p[8] * qq[8]) * 29692;
        w[0] = (int)JPEG_DESCALE(t10 + t0, CB - P1 + 2);
        w[8] = (int)JPEG_DESCALE(t10 - t0, CB - P1 + 2);
    }
    for (int r = 0; r < 2; r++) {
        const int* w = ws + r * 8;
        u8* o = out + r * stride;
        if (!w[1] && !w[3] && !w[5] && !w[7]) {
            o[0] = o[1] = jpeg_clamp(JPEG_DESCALE((long long)w[0], P1 + 3) + 128);
            continue;
        }
        const long long t10 = (long long)w[0] * (1 << (CB + 2));
        const long long t0 = (long long)w[7] * -5906 + (long long)w[5] * 6967 + (long long)w[3] * -10426 + (long long)w[1] * 29692;
        const int S = CB + P1 + 3 + 2;
        o[0] = jpeg_clamp(JPEG_DESCALE(t10 + t0, S) + 128);
        o[1] = jpeg_clamp(JPEG_DESCALE(t10 - t0, S) + 128);
    }
}

// jpeg_find_blk and jpeg_find_rgb return the image holding coefficient block b, or jpeg_rgb
// block b (the images are in call order, so both firsts ascend).
__device__ __forceinline__ int jpeg_find_blk(const JCtx& x, long long b)
{
    int lo = 0, hi = (int)x.nimg - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (x.im[mid].blk0 <= b) lo = mid; else hi = mid - 1;
    }
    return lo;
}
__device__ __forceinline__ int jpeg_find_rgb(const JCtx& x, long long b)
{
    int lo = 0, hi = (int)x.nimg - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (x.im[mid].rgb0 <= b) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// jpeg_idct runs the IDCT of every block of the call into its component plane.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS) jpeg_idct(const JCtx* __restrict__ xp)
{
    const JCtx& x = *xp;
    const long long b = (long long)blockIdx.x * IMGPIPE_THREADS + threadIdx.x;
    if (b >= x.nblk)
        return;
    const int i = jpeg_find_blk(x, b);
    const JImg* g = x.im + i;
    const long long local = b - g->blk0;
    const long long m = local / g->bpm;
    const int s = (int)(local % g->bpm), c = g->slotc[s];
    int k = s;
    for (int j = 0; j < c; j++)
        k -= g->hs[j] * g->vs[j];
    const int bx = (int)(m % g->mx) * g->hs[c] + k % g->hs[c], by = (int)(m / g->mx) * g->vs[c] + k / g->hs[c];
    const int ss = g->ss[c], pw = g->pw[c];
    jpeg_idct_block(x.coef + b * 64, g->qt[c], ss, x.planes + g->poff[c] + (long long)by * ss * pw + (long long)bx * ss, pw);
}

// jpeg_sample returns component c's value at output pixel (x, y), upsampled as jdsample.c does
// (context rows and columns beyond the component's real samples repeat its last ones).
__device__ __forceinline__ int jpeg_sample(const JImg* g, int c, const u8* p, int x, int y)
{
    const int pw = g->pw[c], dw = g->dw[c], dh = g->dh[c];
    switch (g->up[c]) {
    case JPEG_UP_FULL: return p[(long long)y * pw + x];
    case JPEG_UP_H2V1: return p[(long long)y * pw + (x >> 1)];
    case JPEG_UP_H2V2: return p[(long long)(y >> 1) * pw + (x >> 1)];
    case JPEG_UP_INT: return p[(long long)(y / g->ve[c]) * pw + x / g->he[c]];
    case JPEG_UP_H2V1F: {
        const u8* r = p + (long long)y * pw;
        const int j = x >> 1;
        if (!(x & 1))
            return j == 0 ? r[0] : (3 * r[j] + r[j - 1] + 1) >> 2;
        return j == dw - 1 ? r[j] : (3 * r[j] + r[j + 1] + 2) >> 2;
    }
    case JPEG_UP_H1V2F: {
        const int r = y >> 1;
        int n = (y & 1) ? r + 1 : r - 1;
        n = n < 0 ? 0 : n > dh - 1 ? dh - 1 : n;
        return (3 * p[(long long)r * pw + x] + p[(long long)n * pw + x] + ((y & 1) ? 2 : 1)) >> 2;
    }
    default: { // JPEG_UP_H2V2F
        const int r = y >> 1;
        int n = (y & 1) ? r + 1 : r - 1;
        n = n < 0 ? 0 : n > dh - 1 ? dh - 1 : n;
        const u8 *a = p + (long long)r * pw, *b = p + (long long)n * pw;
        const int j = x >> 1, cs = 3 * a[j] + b[j];
        if (!(x & 1))
            return j == 0 ? (cs * 4 + 8) >> 4 : (3 * cs + 3 * a[j - 1] + b[j - 1] + 8) >> 4;
        return j == dw - 1 ? (cs * 4 + 7) >> 4 : (3 * cs + 3 * a[j + 1] + b[j + 1] + 7) >> 4;
    }
    }
}

// jpeg_rgb writes every output pixel: upsampled YCbCr to RGB (jdcolor.c's tables, computed), or
// gray replicated.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS) jpeg_rgb(const JCtx* __restrict__ xp)
{
    const JCtx& x = *xp;
    if (blockIdx.x >= x.nrgb)
        return;
    const int i = jpeg_find_rgb(x, (long long)blockIdx.x);
    const JImg* g = x.im + i;
    const long long px = ((long long)blockIdx.x - g->rgb0) * IMGPIPE_THREADS + threadIdx.x;
    if (px >= (long long)g->ow * g->oh)
        return;
    const int X = (int)(px % g->ow), Y = (int)(px / g->ow);
    u8* d = (u8*)g->out + px * 3;
    const int y = jpeg_sample(g, 0, x.planes + g->poff[0], X, Y);
    if (g->gray) {
        d[0] = d[1] = d[2] = (u8)y;
        return;
    }
    const int cb = jpeg_sample(g, 1, x.planes + g->poff[1], X, Y) - 128;
    const int cr = jpeg_sample(g, 2, x.planes + g->poff[2], X, Y) - 128;
    d[0] = jpeg_clamp(y + ((91881LL * cr + 32768) >> 16));
    d[1] = jpeg_clamp(y + ((-22554LL * cb + 32768 - 46802LL * cr) >> 16));
    d[2] = jpeg_clamp(y + ((116130LL * cb + 32768) >> 16));
}
