"""The chain in plain PyTorch ops, shared by torch_naive.py, torch_tuned.py and torchvision_nvjpeg.py.

It reproduces docs/semantics.md bit for bit with float32 arithmetic that stays exact:
- grayscale: 9798 R + 19235 G + 3735 B + 16384 < 2^24, so the float32 sum is an exact integer
  and the >> 15 is a floor of a multiplication by 2^-15;
- horizontal pass: conv2d with the integer taps; h <= 255 * 16384 < 2^24, exact;
- vertical pass: v can reach 2^30, past float32's 24-bit mantissa, so h16 is split into its high
  and low bytes, each is convolved (both sums < 2^24, exact), and v = 256 hi + lo in int32.
The conv outputs are rounded before use: if cuDNN ever picks an algorithm that is not exact on
integers (FFT, Winograd), the error is far below 0.5 and rounding removes it. TF32 is turned off,
since its 10-bit mantissa would not be exact.
"""

import torch
import torch.nn.functional as F

from common import blur_taps


def setup_exact_math():
    """Turns off TF32 and lets cuDNN pick the fastest algorithm (results are rounded anyway)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True


class Chain:
    """gray | blur | transpose | hist on batches of RGB uint8 frames on one CUDA device."""

    def __init__(self, sigma, device):
        taps = blur_taps(sigma)
        self.r = len(taps) // 2
        w = torch.tensor(taps, dtype=torch.float32, device=device)
        self.wh = w.view(1, 1, 1, -1)
        # groups=2 convolves the high and low byte planes in one call
        self.wv = w.view(1, 1, -1, 1).repeat(2, 1, 1, 1)
        self.device = device
        self._offsets = {}

    def gray(self, x, channels_last=True):
        """(B, H, W, 3) or (B, 3, H, W) uint8 -> (B, 1, H, W) float32 holding the exact Y."""
        xf = x.to(torch.float32)
        if channels_last:
            r, g, b = xf[..., 0], xf[..., 1], xf[..., 2]
        else:
            r, g, b = xf[:, 0], xf[:, 1], xf[:, 2]
        s = r * 9798 + g * 19235 + b * 3735 + 16384
        return torch.floor(s * (1.0 / 32768)).unsqueeze(1)

    def blur(self, y):
        """(B, 1, H, W) float32 gray -> (B, H, W) uint8 blurred, exactly as docs/semantics.md."""
        r = self.r
        h = F.conv2d(F.pad(y, (r, r, 0, 0), mode="replicate"), self.wh)
        h16 = torch.floor((torch.round(h) + 32) * (1.0 / 64))
        hi = torch.floor(h16 * (1.0 / 256))
        planes = torch.cat((hi, h16 - hi * 256), dim=1)  # (B, 2, H, W), each plane <= 255
        v2 = F.conv2d(F.pad(planes, (0, 0, r, r), mode="replicate"), self.wv, groups=2)
        v2 = torch.round(v2).to(torch.int32)
        v = v2[:, 0] * 256 + v2[:, 1]
        return ((v + (1 << 21)) >> 22).to(torch.uint8)

    def hist(self, img):
        """(B, ...) uint8 -> (B, 256) int64 counts, with one bincount for the whole batch."""
        n = img.shape[0]
        off = self._offsets.get(n)
        if off is None:
            off = torch.arange(n, device=self.device, dtype=torch.int32).mul_(256).view(n, 1)
            self._offsets[n] = off
        idx = img.reshape(n, -1).to(torch.int32) + off
        return torch.bincount(idx.view(-1), minlength=256 * n).view(n, 256)

    def __call__(self, x, channels_last=True):
        """Runs the chain; returns (transposed gray (B, W, H) uint8, histograms (B, 256) int64)."""
        out = self.blur(self.gray(x, channels_last))
        t = out.transpose(1, 2).contiguous()
        # counts do not depend on the layout; taking them from out lets them skip the transpose
        return t, self.hist(out)


def device_name():
    """The name of the current CUDA device."""
    return torch.cuda.get_device_name(torch.cuda.current_device())


def check(fn, device, sizes, taps, seed=7):
    """Runs fn (a Chain, or a compiled one) on small random frames of each size against the reference."""
    import numpy as np

    from common import compare, ref_chain

    rng = np.random.default_rng(seed)
    ok = True
    for w, h in sizes:
        frames = rng.integers(0, 256, (3, h, w, 3), dtype=np.uint8)
        x = torch.from_numpy(frames).to(device)
        t, hist = fn(x)
        t, hist = t.cpu().numpy(), hist.cpu().numpy()
        for i in range(frames.shape[0]):
            want_t, want_h = ref_chain(frames[i], taps)
            good, _, _ = compare(f"{w}x{h}[{i}]", t[i], hist[i], want_t, want_h)
            ok &= good
    return ok
