// resize.cu: the resize stage (stages.Resize), bit-exact with the CPU.
//
// The integer taps are those of stages.ResizeAxis.Weights, evaluated here by
// the same integer steps (window, raw weight, reciprocal normalisation, the
// remainder on the largest raw weight) from the same inputs: each image's axis
// geometry (a record after the launch table) and the Lanczos table (a launch
// argument, stages.LanczosTable). The arithmetic is stages.Resize's, separable:
// each source row is summed horizontally into h16, then the h16 rows are summed
// vertically.
//
// A block makes a tile of 64 destination pixels by 16 destination rows, in one
// pass and without scratch memory: it walks the source rows the tile's rows
// read, 16 at a time, sums each horizontally into shared memory, then adds
// them into the vertical sums each thread keeps in registers. Neighbouring
// tiles of a column share some source rows and sum them again (about 1.3× the
// horizontal work when shrinking with lanczos3), which keeps the memory a
// launch needs independent of the sizes. The taps of the tile's 64 columns
// and 16 rows are set up once per block (stages.ResizeAxis.Window and the
// normaliser), and a tap's weight is computed once for the 4 rows a thread
// sums with it.
#include "geometry.cuh"

#define IMGPIPE_RESIZE_LANCZOS 769 // 3·256+1 table entries (stages.LanczosSteps = 256)
#define IMGPIPE_RESIZE_TILE_X 64   // destination pixels across a tile
#define IMGPIPE_RESIZE_TILE_Y 16   // destination rows of a tile
#define IMGPIPE_RESIZE_RECORD 32   // sizeof(ResizeGeom)

constexpr int kResizeStep = 16; // source rows a block sums horizontally at a time

// ResizeGeom mirrors cudastage's resize record: per axis the scaled size,
// the cover crop's offset and the output size (the input is the entry's w, h).
struct ResizeGeom {
    int sx, offx, outx, sy, offy, outy, pad0, pad1;
};
static_assert(sizeof(ResizeGeom) == IMGPIPE_RESIZE_RECORD, "ResizeGeom must match cudastage's record");

// ResizeArgs mirrors cudastage's resizeParam: a by-value kernel parameter.
struct ResizeArgs {
    int filter; // 0 area, 1 linear, 2 lanczos3
    int lt[IMGPIPE_RESIZE_LANCZOS];
};

__device__ __forceinline__ long long floordiv(long long a, long long b)
{
    long long q = a / b;
    if (a % b != 0 && a < 0)
        q--;
    return q;
}

// Axis is one destination pixel's taps along one axis: its scaled coordinate
// u, the window [lo, hi), the normaliser m, the tap that takes the remainder.
struct Axis {
    long long n, s, u, rq, m;
    int lo, hi, arg, fix;
};

__device__ __forceinline__ long long raw_weight(const Axis& a, int f, long long j, const int* lt)
{
    if (f == 0)
        return min((a.u + 1) * a.n, (j + 1) * a.s) - max(a.u * a.n, j * a.s);
    if (f == 1) {
        const long long num = (2 * a.u + 1) * a.n - a.s;
        const long long lo = floordiv(num, 2 * a.s);
        const long long frac = num - 2 * a.s * lo;
        return j == lo ? 2 * a.s - frac : frac;
    }
    long long d = (2 * j + 1) * a.s - (2 * a.u + 1) * a.n;
    if (d < 0)
        d = -d;
    const long long p = (d * a.rq) >> 40;
    const long long k = p >> 8, r = p & 255;
    return (long long)lt[k] * (256 - r) + (long long)lt[k + 1] * r;
}

__device__ __forceinline__ int tap(const Axis& a, int f, int j, const int* lt)
{
    const int w = (int)((raw_weight(a, f, j, lt) * a.m + (1LL << 31)) >> 32);
    return j == a.arg ? w + a.fix : w;
}

__device__ Axis make_axis(int f, int n, int s, int off, int i, const int* lt)
{
    Axis a;
    a.n = n;
    a.s = s;
    a.u = i + off;
    a.rq = (1LL << 56) / (2 * max(a.n, a.s));
    long long l, h;
    if (f == 0) {
        l = a.u * a.n / a.s;
        h = ((a.u + 1) * a.n + a.s - 1) / a.s;
    } else if (f == 1) {
        l = floordiv((2 * a.u + 1) * a.n - a.s, 2 * a.s);
        h = l + 2;
    } else {
        const long long q3 = 6 * max(a.n, a.s), c2 = (2 * a.u + 1) * a.n;
        l = floordiv(c2 - q3 - a.s, 2 * a.s) + 1;
        h = -floordiv(-(c2 + q3 - a.s), 2 * a.s);
    }
    a.lo = (int)max(l, 0LL);
    a.hi = (int)min(h, a.n);
    long long sum = 0, best = 0;
    a.arg = a.lo;
    for (int j = a.lo; j < a.hi; j++) {
        const long long r = raw_weight(a, f, j, lt);
        sum += r;
        if (j == a.lo || r > best) {
            best = r;
            a.arg = j;
        }
    }
    a.m = (1LL << 46) / max(sum, 1LL);
    a.fix = 0;
    long long total = 0;
    for (int j = a.lo; j < a.hi; j++)
        total += (raw_weight(a, f, j, lt) * a.m + (1LL << 31)) >> 32;
    a.fix = (int)((1 << 14) - total);
    return a;
}

// resize_tile makes one tile for C channels. Thread t owns destination column
// t % 64 of the tile and, with G = 4 groups of 64 threads, its rows
// t / 64 + 4k (k < 4): it sums source rows r0 + t / 64 + 4k of each step
// horizontally and keeps the vertical sums of its destination rows.
template <int C>
__device__ __forceinline__ void resize_tile(const Img& d, int f, const int* lt,
                                            const Axis* axes, int x0, int y0, int nx, int ny, u16* sm,
                                            const u8* __restrict__ src, u8* __restrict__ dst)
{
    constexpr int TX = IMGPIPE_RESIZE_TILE_X, G = IMGPIPE_THREADS / TX;
    constexpr int STEP = kResizeStep;
    constexpr int RH = STEP / G;  // source rows of a step each thread sums
    constexpr int RV = IMGPIPE_RESIZE_TILE_Y / G; // destination rows per thread
    const int cx = threadIdx.x % TX, grp = threadIdx.x / TX;
    const bool col = cx < nx;
    // The source rows the tile reads: the union of its rows' windows.
    int r0 = d.h, r1 = 0;
    for (int i = 0; i < ny; i++) {
        r0 = min(r0, axes[TX + i].lo);
        r1 = max(r1, axes[TX + i].hi);
    }
    Axis ax;
    if (col)
        ax = axes[cx];
    long long v[RV][C];
#pragma unroll
    for (int k = 0; k < RV; k++)
#pragma unroll
        for (int ch = 0; ch < C; ch++)
            v[k][ch] = 0;
    const u8* img = src + d.src_off;
    for (int s0 = r0; s0 < r1; s0 += STEP) {
        if (col) {
            int h[RH][C];
            const u8* row[RH];
#pragma unroll
            for (int k = 0; k < RH; k++) {
                // A row past the range sums the range's last row again (and
                // is never read back), so the tap loop needs no test.
                row[k] = img + (size_t)min(s0 + grp + G * k, r1 - 1) * d.src_stride;
#pragma unroll
                for (int ch = 0; ch < C; ch++)
                    h[k][ch] = 0;
            }
            for (int j = ax.lo; j < ax.hi; j++) {
                const int w = tap(ax, f, j, lt);
#pragma unroll
                for (int k = 0; k < RH; k++)
#pragma unroll
                    for (int ch = 0; ch < C; ch++)
                        h[k][ch] += w * (int)row[k][j * C + ch];
            }
#pragma unroll
            for (int k = 0; k < RH; k++)
#pragma unroll
                for (int ch = 0; ch < C; ch++)
                    sm[(grp + G * k) * (TX * C) + cx * C + ch] = (u16)((min(max(h[k][ch], 0), 255 << 14) + 32) >> 6);
        }
        __syncthreads();
        if (col) {
#pragma unroll
            for (int k = 0; k < RV; k++) {
                const int yl = grp + G * k;
                if (yl >= ny)
                    break;
                const Axis ay = axes[TX + yl];
                const int lo = max(ay.lo, s0), hi = min(ay.hi, s0 + STEP);
                for (int j = lo; j < hi; j++) {
                    const long long wy = tap(ay, f, j, lt);
                    const u16* hs = sm + (j - s0) * (TX * C) + cx * C;
#pragma unroll
                    for (int ch = 0; ch < C; ch++)
                        v[k][ch] += wy * (long long)hs[ch];
                }
            }
        }
        __syncthreads();
    }
    if (!col)
        return;
#pragma unroll
    for (int k = 0; k < RV; k++) {
        const int yl = grp + G * k;
        if (yl >= ny)
            break;
        u8* o = dst + d.dst_off + (size_t)(y0 + yl) * d.dst_stride + (size_t)(x0 + cx) * C;
#pragma unroll
        for (int ch = 0; ch < C; ch++)
            o[ch] = (u8)min(max((v[k][ch] + (1LL << 21)) >> 22, 0LL), 255LL);
    }
}

// imgpipe_resize makes 64×16-pixel tiles of the destination; tiles_x is
// ⌈out width / 64⌉.
extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_resize(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst,
               const __grid_constant__ ResizeArgs args)
{
    constexpr int TX = IMGPIPE_RESIZE_TILE_X, TY = IMGPIPE_RESIZE_TILE_Y;
    __shared__ int lt[IMGPIPE_RESIZE_LANCZOS];
    __shared__ Axis axes[TX + TY]; // the tile's columns, then its rows
    __shared__ u16 sm[kResizeStep * TX * 3]; // one step's horizontal sums
    if (n <= 0)
        return;
    const int i = find_image(tab, n);
    const Img d = tab[i];
    const ResizeGeom g = extra_records<ResizeGeom>(tab, n)[i];
    const int tile = (int)blockIdx.x - d.block0;
    const int x0 = (tile % d.tiles_x) * TX, y0 = (tile / d.tiles_x) * TY;
    const int nx = min(TX, g.outx - x0), ny = min(TY, g.outy - y0);
    if (nx <= 0 || ny <= 0)
        return; // only with a table that does not match the launch; uniform, before any barrier
    const int f = args.filter;
    for (int k = threadIdx.x; k < IMGPIPE_RESIZE_LANCZOS; k += IMGPIPE_THREADS)
        lt[k] = args.lt[k];
    __syncthreads();
    const int t = threadIdx.x;
    if (t < nx)
        axes[t] = make_axis(f, d.w, g.sx, g.offx, x0 + t, lt);
    else if (t >= TX && t < TX + ny)
        axes[t] = make_axis(f, d.h, g.sy, g.offy, y0 + t - TX, lt);
    __syncthreads();
    if (d.c == 3)
        resize_tile<3>(d, f, lt, axes, x0, y0, nx, ny, sm, src, dst);
    else
        resize_tile<1>(d, f, lt, axes, x0, y0, nx, ny, sm, src, dst);
}
