// crop.cu: the crop stage (stages.Crop). The rectangle of each image,
// stages.CropSpec.Rect's, comes from the host as a per-image record after the
// launch table. See geometry.cuh for the tiling (over the destination).
#include "geometry.cuh"

#define IMGPIPE_CROP_RECORD 16 // sizeof(CropRect)

// CropRect mirrors cudastage's crop record: origin and size in the source.
struct CropRect {
    int x0, y0, w, h;
};
static_assert(sizeof(CropRect) == IMGPIPE_CROP_RECORD, "CropRect must match cudastage's record");

extern "C" __global__ void __launch_bounds__(IMGPIPE_THREADS)
imgpipe_crop(const Img* __restrict__ tab, int n, const u8* __restrict__ src, u8* __restrict__ dst)
{
    if (n <= 0)
        return;
    const int i = find_image(tab, n);
    const Img d = tab[i];
    const CropRect r = extra_records<CropRect>(tab, n)[i];
    const long long p = pixel_index(d, (long long)r.w * r.h);
    if (p < 0)
        return;
    const int x = (int)(p % r.w), y = (int)(p / r.w);
    copy_px(dst + d.dst_off + (size_t)y * d.dst_stride + (size_t)x * d.c,
            src + d.src_off + (size_t)(r.y0 + y) * d.src_stride + (size_t)(r.x0 + x) * d.c, d.c);
}
