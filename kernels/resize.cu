// resize.cu: the resize stage (stages.Resize), bit-exact with the CPU.
//
// Each thread makes one destination pixel (all channels). The integer taps
// are those of stages.ResizeAxis.Weights, evaluated here by the same integer
// steps (window, raw weight, reciprocal normalisation, the remainder on the
// largest raw weight) from the same inputs: each image's axis geometry
// (a record after the launch table) and the Lanczos table (a launch
// argument, stages.LanczosTable). The horizontal sum of each source row the
// pixel reads is recomputed per pixel rather than shared through shared
// memory: simple and exact, at Kx·Ky multiply-adds per pixel.
#include "geometry.cuh"

#define IMGPIPE_RESIZE_LANCZOS 769 // 3·256+1 table entries (stages.LanczosSteps = 256)

// ResizeGeom mirrors cudastage's resize record: per axis the scaled size,
// the cover crop's offset and the output size (the input is the entry's w, h).
struct ResizeGeom {
    int sx, offx, outx, sy, offy, outy, pad0, pad1;
};

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

// Axis is one axis of one output pixel: its scaled coordinate u, the
// window [lo, hi), the normaliser m, the tap that takes the remainder.
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

__device__ void make_axis(Axis& a, int f, int n, int s, int off, int i, const int* lt)
{
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
}

extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_resize(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst, const ResizeArgs args)
{
    if (n <= 0)
        return;
    const int i = find_image(tab, n);
    const Img d = tab[i];
    const ResizeGeom g = extra_records<ResizeGeom>(tab, n)[i];
    const long long p = pixel_index(d, (long long)g.outx * g.outy);
    if (p < 0)
        return;
    const int x = (int)(p % g.outx), y = (int)(p / g.outx);
    const int f = args.filter;
    Axis ax, ay;
    make_axis(ax, f, d.w, g.sx, g.offx, x, args.lt);
    make_axis(ay, f, d.h, g.sy, g.offy, y, args.lt);
    const int c = d.c;
    long long v[3] = {0, 0, 0};
    for (int j = ay.lo; j < ay.hi; j++) {
        const long long wy = tap(ay, f, j, args.lt);
        const u8* row = src + d.src_off + (size_t)j * d.src_stride;
        int h[3] = {0, 0, 0};
        for (int k = ax.lo; k < ax.hi; k++) {
            const int wx = tap(ax, f, k, args.lt);
            const u8* px = row + (size_t)k * c;
            h[0] += wx * (int)px[0];
            if (c == 3) {
                h[1] += wx * (int)px[1];
                h[2] += wx * (int)px[2];
            }
        }
        for (int ch = 0; ch < c; ch++) {
            const int hc = min(max(h[ch], 0), 255 << 14);
            v[ch] += wy * (long long)((hc + 32) >> 6);
        }
    }
    u8* o = dst + d.dst_off + (size_t)y * d.dst_stride + (size_t)x * c;
    for (int ch = 0; ch < c; ch++)
        o[ch] = (u8)min(max((v[ch] + (1LL << 21)) >> 22, 0LL), 255LL);
}
