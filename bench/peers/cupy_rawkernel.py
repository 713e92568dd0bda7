#!/usr/bin/env python3
"""CuPy RawKernel: hand-written CUDA kernels for the chain, in the seeds' PyCUDA style.

Two kernels per batch, written the way a CUDA programmer would for this chain:
- gray_hblur: each block loads one row segment plus its halo as RGB, converts it to gray in shared
  memory, and writes the horizontal pass h16 = (sum + 32) >> 6 as uint16;
- vblur_t_hist: each block takes a 32-wide column band, loads 32 x (32 + 2r) tiles of h16 into
  shared memory, does the vertical pass, writes the result transposed (coalesced, through the
  tile) and counts it in a shared-memory histogram that is added to the global one once per block.
The integer semantics are docs/semantics.md's exactly (uint32 sums, clamp borders, the same taps).
Host side: the frame pool and the outputs are in pinned memory; S streams, one slot of device and
pinned buffers per stream, cudaMemcpyAsync both ways, the histogram zeroed by cudaMemsetAsync.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (first: it explains a missing numpy)
import numpy as np  # noqa: E402

SYSTEM = "cupy-rawkernel"

SOURCE = r"""
extern "C" __global__ void gray_hblur(const unsigned char* __restrict__ in,
                                      unsigned short* __restrict__ h16,
                                      const unsigned int* __restrict__ taps,
                                      int W, int H, int r)
{
    extern __shared__ unsigned char sg[];  // blockDim.x + 2r gray values
    const int b = blockIdx.z, y = blockIdx.y, x0 = blockIdx.x * blockDim.x;
    const unsigned char* row = in + ((size_t)b * H + y) * (size_t)W * 3;
    const int n = blockDim.x + 2 * r;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        int x = min(max(x0 + i - r, 0), W - 1);
        const unsigned char* p = row + 3 * x;
        sg[i] = (unsigned char)((9798u * p[0] + 19235u * p[1] + 3735u * p[2] + 16384u) >> 15);
    }
    __syncthreads();
    const int x = x0 + threadIdx.x;
    if (x < W) {
        unsigned int acc = 0;
        for (int i = 0; i <= 2 * r; i++) acc += taps[i] * sg[threadIdx.x + i];
        h16[((size_t)b * H + y) * W + x] = (unsigned short)((acc + 32u) >> 6);
    }
}

#define TW 32
#define TY 8
// block (TW, TY); grid (ceil(W/TW), ceil(H/(TW*tiles)), B); dynamic smem (TW + 2r) * (TW + 1) words
extern "C" __global__ void vblur_t_hist(const unsigned short* __restrict__ h16,
                                        unsigned char* __restrict__ out,
                                        unsigned long long* __restrict__ hist,
                                        const unsigned int* __restrict__ taps,
                                        int W, int H, int r, int tiles)
{
    extern __shared__ unsigned int tile[];
    __shared__ unsigned int sh[256];
    const int pitch = TW + 1;  // odd pitch: column reads by a warp hit 32 different banks
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TW + tx;
    const int b = blockIdx.z, x0 = blockIdx.x * TW;
    const unsigned short* src = h16 + (size_t)b * W * H;
    unsigned char* dst = out + (size_t)b * W * H;
    for (int i = tid; i < 256; i += TW * TY) sh[i] = 0;
    const int ybeg = blockIdx.y * tiles * TW;
    const int yend = min(H, ybeg + tiles * TW);
    const int rows = TW + 2 * r;
    const int xs = min(x0 + tx, W - 1);
    for (int y0 = ybeg; y0 < yend; y0 += TW) {
        __syncthreads();
        for (int rr = ty; rr < rows; rr += TY) {
            int y = min(max(y0 + rr - r, 0), H - 1);
            tile[rr * pitch + tx] = src[(size_t)y * W + xs];
        }
        __syncthreads();
        const int y = y0 + tx;  // lanes run along y, so the transposed store is coalesced
        for (int c = ty; c < TW; c += TY) {
            const int x = x0 + c;
            if (x < W && y < H) {
                unsigned int v = 0;
                for (int j = 0; j <= 2 * r; j++) v += taps[j] * tile[(tx + j) * pitch + c];
                unsigned char o = (unsigned char)((v + (1u << 21)) >> 22);
                dst[(size_t)x * H + y] = o;
                atomicAdd(&sh[o], 1u);
            }
        }
    }
    __syncthreads();
    unsigned long long* hb = hist + (size_t)b * 256;
    for (int i = tid; i < 256; i += TW * TY)
        if (sh[i]) atomicAdd(&hb[i], (unsigned long long)sh[i]);
}
"""

HBLUR_THREADS = 256
TW, TY = 32, 8
TILES_PER_BLOCK = 8  # 256 rows per block: histogram flushes stay far fewer than pixels


class Kernels:
    """The compiled kernels, the taps on the device, and launch helpers for one batch."""

    def __init__(self, cp, taps):
        self.cp = cp
        mod = cp.RawModule(code=SOURCE, options=("-std=c++14",))
        self.k1 = mod.get_function("gray_hblur")
        self.k2 = mod.get_function("vblur_t_hist")
        self.r = len(taps) // 2
        self.taps = cp.asarray(np.array(taps, np.uint32))
        smem = (TW + 2 * self.r) * (TW + 1) * 4
        if smem > 48 * 1024:
            raise common.UsageError(f"sigma too large for this kernel's shared-memory tile ({smem} bytes)")
        self.smem2 = smem

    def launch(self, d_in, d_h16, d_out, d_hist, n, W, H):
        """Enqueues the chain for n frames on the current stream (hist must already be zero)."""
        i32 = np.int32
        self.k1(
            ((W + HBLUR_THREADS - 1) // HBLUR_THREADS, H, n),
            (HBLUR_THREADS,),
            (d_in, d_h16, self.taps, i32(W), i32(H), i32(self.r)),
            shared_mem=HBLUR_THREADS + 2 * self.r,
        )
        band = TW * TILES_PER_BLOCK
        self.k2(
            ((W + TW - 1) // TW, (H + band - 1) // band, n),
            (TW, TY),
            (d_h16, d_out, d_hist, self.taps, i32(W), i32(H), i32(self.r), i32(TILES_PER_BLOCK)),
            shared_mem=self.smem2,
        )


def device_name(cp):
    """The current device's name."""
    name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"]
    return name.decode() if isinstance(name, bytes) else name


def run_check(cp, k, taps):
    """Runs the kernels on small odd frames (three per batch) and compares with the reference."""
    rng = np.random.default_rng(7)
    ok = True
    for w, h in common.CHECK_SIZES:
        frames = rng.integers(0, 256, (3, h, w, 3), dtype=np.uint8)
        d_in = cp.asarray(frames)
        d_h16 = cp.empty((3, h, w), cp.uint16)
        d_out = cp.empty((3, w, h), cp.uint8)
        d_hist = cp.zeros((3, 256), cp.uint64)
        k.launch(d_in, d_h16, d_out, d_hist, 3, w, h)
        got_t, got_h = d_out.get(), d_hist.get()
        for i in range(3):
            want_t, want_h = common.ref_chain(frames[i], taps)
            ok &= common.compare(f"{w}x{h}[{i}]", got_t[i], got_h[i], want_t, want_h)[0]
    return ok


def main():
    args = common.parse(common.make_parser(__doc__.splitlines()[0]))
    try:
        import cupy as cp
        import cupyx
    except ImportError as e:
        print(f"error: cupy is not available: {e}", file=sys.stderr)
        return 3
    if cp.cuda.runtime.getDeviceCount() < 1:
        print("error: no CUDA device visible to CuPy", file=sys.stderr)
        return 3
    k = Kernels(cp, args.taps)
    if args.check:
        ok = run_check(cp, k, args.taps)
        print(f"check {SYSTEM}: {'all equal' if ok else 'MISMATCHES'}", file=sys.stderr)
        return 0 if ok else 1

    H, W, B, S, P = args.height, args.width, args.batch, args.streams, args.pool
    rt = cp.cuda.runtime
    frame_bytes = H * W * 3
    pool = cupyx.empty_pinned((P, H, W, 3), np.uint8)
    common.fill_pool(pool, args.seed)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(S)]
    slots = []
    for _ in range(S):
        slots.append(
            dict(
                d_in=cp.empty((B, H, W, 3), cp.uint8),
                d_h16=cp.empty((B, H, W), cp.uint16),
                d_out=cp.empty((B, W, H), cp.uint8),
                d_hist=cp.empty((B, 256), cp.uint64),
                h_out=cupyx.empty_pinned((B, W, H), np.uint8),
                h_hist=cupyx.empty_pinned((B, 256), np.uint64),
            )
        )
    pool_ptr = pool.ctypes.data

    def enqueue(kb, first, n):
        # Stream order makes slot reuse safe: batch kb+S on this stream starts after kb's D2H.
        s, sl = streams[kb % S], slots[kb % S]
        with s:
            for slot, m, off in common.pool_spans(first, n, P):
                rt.memcpyAsync(
                    sl["d_in"].data.ptr + off * frame_bytes,
                    pool_ptr + slot * frame_bytes,
                    m * frame_bytes,
                    rt.memcpyHostToDevice,
                    s.ptr,
                )
            rt.memsetAsync(sl["d_hist"].data.ptr, 0, n * 256 * 8, s.ptr)
            k.launch(sl["d_in"], sl["d_h16"], sl["d_out"], sl["d_hist"], n, W, H)
            rt.memcpyAsync(sl["h_out"].ctypes.data, sl["d_out"].data.ptr, n * W * H, rt.memcpyDeviceToHost, s.ptr)
            rt.memcpyAsync(sl["h_hist"].ctypes.data, sl["d_hist"].data.ptr, n * 256 * 8, rt.memcpyDeviceToHost, s.ptr)

    def run():
        for kb, (first, n) in enumerate(common.batches(args.frames, B)):
            enqueue(kb, first, n)

    def sync():
        cp.cuda.Device().synchronize()

    runs = common.timed_runs(run, args.warmup, args.repeats, sync)

    n = min(B, args.frames)
    enqueue(0, 0, n)
    sync()
    exact = True
    for i in {0, n - 1}:
        want_t, want_h = common.ref_chain(pool[i % P], args.taps)
        exact &= common.compare(f"frame {i}", slots[0]["h_out"][i], slots[0]["h_hist"][i], want_t, want_h)[0]

    rec = common.record(
        SYSTEM,
        args,
        device_name(cp),
        runs,
        args.frames,
        args.frames * W * H,
        exact,
        "the semantics of docs/semantics.md exactly (integer kernels); pinned pool and outputs, cudaMemcpyAsync,"
        " one slot per stream; 2 kernels per batch (gray+hblur, vblur+transpose+hist)",
        cupy=cp.__version__,
    )
    common.emit(rec, args.json)
    return 0


if __name__ == "__main__":
    common.main_guard(main)
