// gray.cu: the grayscale stage's formula as a user kernel, for the `kernel` stage:
//   imgpipe run ... -p 'decode | kernel src=samples/kernels/gray.cu fn=gray out=gray | save'
// One thread per output pixel, with the image calling convention (imgpipe stages kernel):
// Y = (9798 R + 19235 G + 3735 B + 16384) >> 15, the same bits as the built-in grayscale.
extern "C" __global__ void gray(const unsigned char *in, unsigned char *out, int width, int height,
                                int channels, int in_pitch, int out_pitch, int in_width,
                                int in_height, int in_channels)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height)
        return;
    const unsigned char *p = in + (size_t)y * in_pitch + (size_t)x * in_channels;
    unsigned int v = in_channels == 1 ? p[0] : (9798u * p[0] + 19235u * p[1] + 3735u * p[2] + 16384u) >> 15;
    out[(size_t)y * out_pitch + x] = (unsigned char)v;
}
