#pragma once
// pnghuff.cuh: the fast PNG encoder's Huffman codes (docs/png-fast.md §3 and §4): the
// length-limited code lengths of a block's histogram and their canonical codes. Used by
// imgpipe_png_plan in pngenc.cu.
#include "common.cuh"

namespace png {

// LenWork is the shared workspace of lengths().
struct LenWork {
    u32 weight[2 * 257];
    u16 parent[2 * 257];
    u16 depth[2 * 257];
    u16 leaf[257]; // symbols by (f ascending, s ascending)
    u16 rank[257]; // each symbol's place by (f descending, s ascending)
    int bl[258];   // leaves per depth
    int cum[17];   // leaves of length < d, d = 1..L+1
    int nleaf;
};

// lengths computes Lengths(f, N, L) of §3 into len[0..N): the sorts by rank
// in parallel, the two-queue Huffman merge, the depth count and the limit
// (Adjust) in thread 0, the assignment in parallel. Every thread must call
// it; f must hold at least two non-zero counts.
//
// len is written only in the last phase, after a barrier, never while other
// threads scan f: the compiler reads f in 16-byte vectors, so the scan of
// f[0..N) also loads the bytes just past f's end, which are len's in both
// callers (litlen after f, cllen after g). Zeroing len[s] during the scan
// raced with those loads (racecheck: the STS.U8 of len[s] = 0 against the
// scan's LDS.128 of f[256..259]); the loaded bytes were never used, so the
// output was right, but the hazard was real at the hardware level.
__device__ void lengths(const u32* f, int N, int L, u8* len, LenWork& w)
{
    const int t = threadIdx.x;
    for (int s = t; s < N; s += IMGPIPE_THREADS) {
        const u32 fs = f[s];
        if (fs == 0)
            continue;
        int up = 0, down = 0;
        for (int r = 0; r < N; r++) {
            const u32 fr = f[r];
            if (fr == 0)
                continue;
            up += fr < fs || (fr == fs && r < s);
            down += fr > fs || (fr == fs && r < s);
        }
        w.leaf[up] = (u16)s;
        w.rank[s] = (u16)down;
    }
    for (int d = t; d < 258; d += IMGPIPE_THREADS)
        w.bl[d] = 0;
    __syncthreads();
    if (t == 0) {
        int nl = 0;
        for (int s = 0; s < N; s++)
            nl += f[s] != 0;
        for (int i = 0; i < nl; i++)
            w.weight[i] = f[w.leaf[i]];
        // Queue A is leaves [a, nl), queue B internal nodes [b, next).
        int a = 0, b = nl, next = nl;
        for (int k = 0; k < nl - 1; k++) {
            int x[2];
            for (int e = 0; e < 2; e++)
                x[e] = (a < nl && (b >= next || w.weight[a] <= w.weight[b])) ? a++ : b++;
            w.weight[next] = w.weight[x[0]] + w.weight[x[1]];
            w.parent[x[0]] = w.parent[x[1]] = (u16)next;
            next++;
        }
        // Parents come after their children: depths from the root down.
        const int root = next - 1;
        w.depth[root] = 0;
        int maxd = 0;
        for (int k = root - 1; k >= 0; k--) {
            w.depth[k] = w.depth[w.parent[k]] + 1;
            if (k < nl) {
                w.bl[w.depth[k]]++;
                maxd = max(maxd, (int)w.depth[k]);
            }
        }
        for (int i = maxd; i > L; i--) {
            while (w.bl[i] > 0) {
                int j = i - 2;
                while (w.bl[j] == 0)
                    j--;
                w.bl[i] -= 2;
                w.bl[i - 1] += 1;
                w.bl[j + 1] += 2;
                w.bl[j] -= 1;
            }
        }
        w.cum[0] = 0;
        for (int d = 1; d <= L; d++)
            w.cum[d] = w.cum[d - 1] + w.bl[d];
        w.nleaf = nl;
    }
    __syncthreads();
    for (int s = t; s < N; s += IMGPIPE_THREADS) {
        int d = 0; // an absent symbol has no code
        if (f[s] != 0) {
            d = 1;
            while (w.cum[d] <= (int)w.rank[s])
                d++;
        }
        len[s] = (u8)d;
    }
    __syncthreads();
}

// canonical writes the canonical codes (RFC 1951 §3.2.2) of len[0..N),
// bit-reversed for LSB-first packing, as code | length << 16. One thread.
__device__ void canonical(const u8* len, int N, u32* out)
{
    int count[16] = {0};
    for (int s = 0; s < N; s++)
        count[len[s]]++;
    count[0] = 0;
    u32 next[16];
    u32 code = 0;
    for (int b = 1; b < 16; b++) {
        code = (code + count[b - 1]) << 1;
        next[b] = code;
    }
    for (int s = 0; s < N; s++) {
        const int l = len[s];
        out[s] = l == 0 ? 0 : (__brev(next[l]++) >> (32 - l)) | (u32)l << 16;
    }
}

} // namespace png
