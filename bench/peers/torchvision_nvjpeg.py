#!/usr/bin/env python3
"""torchvision nvJPEG + torch ops: a folder of JPEGs decoded on the GPU, the chain, PNGs saved.

The flow a competent PyTorch user writes for a folder:
- a thread pool reads the next batch's files while the GPU works on the current one;
- torchvision.io.decode_jpeg(list, device='cuda', mode=RGB, apply_exif_orientation=True) decodes
  a batch with nvJPEG in one call (a batch that fails is retried file by file, so one bad file
  does not lose the others);
- the chain runs per image with the exact torch ops of torch_ops.Chain (images differ in size);
- each batch's outputs and histograms are packed on the GPU and copied with one non_blocking copy
  into one of two pinned staging buffers, so batch k's copy overlaps batch k+1's decode;
- PNGs are written by cv2.imwrite (default parameters) on a pool of CPU threads.
The decoder is nvJPEG, not imgpipe's: decoded pixels may differ slightly between JPEG decoders,
so outputs are compared with the reference on the pixels nvJPEG produced.
"""

import concurrent.futures as cf
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import common  # noqa: E402

SYSTEM = "torchvision-nvjpeg"


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    cores = len(os.sched_getaffinity(0))
    parser = common.make_parser(__doc__.splitlines()[0], modes=("files",), defaults={"streams": 1, "batch": 32})
    parser.add_argument("--threads", type=int, default=cores, help="reader and writer threads (default: cores, %(default)s)")
    args = common.parse(parser)
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    import cv2
    import torch
    import torchvision
    from torchvision.io import ImageReadMode, decode_jpeg

    import torch_ops

    if not torch.cuda.is_available():
        print("error: no CUDA device visible to PyTorch", file=sys.stderr)
        return 3
    cv2.setNumThreads(1)  # the writer pool is the parallelism; one thread per imwrite
    torch_ops.setup_exact_math()
    dev = torch.device("cuda")
    chain = torch_ops.Chain(args.sigma, dev)
    if args.check:
        ok = torch_ops.check(chain, dev, common.CHECK_SIZES, args.taps)
        print(f"check {SYSTEM}: {'all equal' if ok else 'MISMATCHES'}", file=sys.stderr)
        return 0 if ok else 1

    files = common.list_images(args.input)
    out_dir = args.output or tempfile.mkdtemp(prefix="nvjpeg-peer-")
    outs = [common.out_path(out_dir, args.input, f) for f in files]
    for d in sorted({os.path.dirname(o) for o in outs}):
        os.makedirs(d, exist_ok=True)
    readers = cf.ThreadPoolExecutor(args.threads)
    writers = cf.ThreadPoolExecutor(args.threads)
    groups = [list(range(i, min(i + args.batch, len(files)))) for i in range(0, len(files), args.batch)]
    staging = [None, None]  # pinned buffers, grown on demand
    failed = set()

    def decode(datas, idx):
        tensors = [torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in datas]
        try:
            return decode_jpeg(tensors, mode=ImageReadMode.RGB, device=dev, apply_exif_orientation=True)
        except RuntimeError:
            imgs = []
            for t, i in zip(tensors, idx):
                try:
                    imgs.append(decode_jpeg(t, mode=ImageReadMode.RGB, device=dev, apply_exif_orientation=True))
                except RuntimeError as e:
                    failed.add(i)
                    print(f"decode {files[i]}: {e}", file=sys.stderr)
                    imgs.append(None)
            return imgs

    def gpu_batch(k, datas):
        """Decodes and processes batch k; starts the copy to staging[k % 2]; returns its layout."""
        idx = groups[k]
        imgs = decode(datas, idx)
        parts, hists, layout, pixels = [], [], [], 0
        for i, img in zip(idx, imgs):
            if img is None:
                continue
            t, hist = chain(img.unsqueeze(0), channels_last=False)
            parts.append(t.reshape(-1))
            hists.append(hist.reshape(-1).view(torch.uint8))
            layout.append((i, t.shape[1], t.shape[2]))
            pixels += t.shape[1] * t.shape[2]
        if not parts:
            return layout, 0, None
        flat = torch.cat(parts + hists)
        buf = staging[k % 2]
        if buf is None or buf.numel() < flat.numel():
            buf = staging[k % 2] = torch.empty(max(flat.numel(), 1 << 24), dtype=torch.uint8, pin_memory=True)
        buf[: flat.numel()].copy_(flat, non_blocking=True)
        ev = torch.cuda.Event()
        ev.record()
        return layout, pixels, ev

    def save(k, layout, ev):
        """Waits for batch k's copy, then hands each image to the writer pool."""
        ev.synchronize()
        buf = staging[k % 2].numpy()
        pos, futs = 0, []
        for i, w, h in layout:
            img = buf[pos : pos + w * h].reshape(w, h)
            futs.append(writers.submit(write, outs[i], img))
            pos += w * h
        return futs

    def write(path, img):
        if not cv2.imwrite(path, img):
            raise RuntimeError(f"cannot write {path}")

    def run():
        total = 0
        pending = None  # (k, layout, event) of the batch whose copy is in flight
        writing = [[], []]  # writes still reading staging[0] / staging[1]
        nxt = [readers.submit(read_bytes, files[i]) for i in groups[0]]
        for k in range(len(groups)):
            datas = [f.result() for f in nxt]
            if k + 1 < len(groups):
                nxt = [readers.submit(read_bytes, files[i]) for i in groups[k + 1]]
            for f in writing[k % 2]:  # staging[k % 2] is free once batch k-2's PNGs are written
                f.result()
            layout, pixels, ev = gpu_batch(k, datas)
            total += pixels
            if pending:
                writing[pending[0] % 2] = save(*pending)
            pending = (k, layout, ev) if ev is not None else None
        if pending:
            writing[pending[0] % 2] = save(*pending)
        for f in writing[0] + writing[1]:
            f.result()
        return total

    pixels = []
    runs = common.timed_runs(lambda: pixels.append(run()), args.warmup, args.repeats, torch.cuda.synchronize)

    # Exactness of the chain on the first image, against the reference on nvJPEG's own pixels.
    img = decode_jpeg(torch.frombuffer(bytearray(read_bytes(files[0])), dtype=torch.uint8), mode=ImageReadMode.RGB, device=dev, apply_exif_orientation=True)
    t, hist = chain(img.unsqueeze(0), channels_last=False)
    want_t, want_h = common.ref_chain(img.permute(1, 2, 0).contiguous().cpu().numpy(), args.taps)
    exact = common.compare("first image", t[0].cpu().numpy(), hist[0].cpu().numpy(), want_t, want_h)[0]
    saved = cv2.imread(outs[0], cv2.IMREAD_UNCHANGED)
    if saved is None or not np.array_equal(saved, want_t):
        print(f"the saved {outs[0]} does not hold the expected image", file=sys.stderr)
        exact = False

    readers.shutdown()
    writers.shutdown()
    args.streams = 1
    rec = common.record(
        SYSTEM,
        args,
        torch_ops.device_name(),
        runs,
        len(files) - len(failed),
        pixels[-1],
        exact,
        "decode: nvJPEG via torchvision (pixels may differ from imgpipe's decoder); chain: DESIGN.md"
        " semantics exactly on the decoded pixels; save: cv2.imwrite PNG defaults on CPU threads,"
        " not atomic; one decode stream, two pinned staging buffers",
        torch=torch.__version__,
        torchvision=torchvision.__version__,
        failed=len(failed),
        output=out_dir,
        megapixels=pixels[-1] / 1e6,
        threads=args.threads,
    )
    common.emit(rec, args.json)
    return 0


if __name__ == "__main__":
    common.main_guard(main)
