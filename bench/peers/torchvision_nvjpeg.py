#!/usr/bin/env python3
"""torchvision nvJPEG + torch ops: a folder of JPEGs decoded on the GPU, the chain, PNGs saved.

The flow a competent PyTorch user writes for a folder:
- the files are split into batches of --batch; --streams worker threads each take the next batch,
  read its files, and decode it with one torchvision.io.decode_jpeg(list, device='cuda',
  mode=RGB, apply_exif_orientation=True) call (nvJPEG; the call is thread-safe, and its CPU part,
  the Huffman decoding, then runs on several cores at once). A batch that fails is retried file
  by file, so one bad file does not lose the others;
- each worker runs on its own CUDA stream; the chain runs per image (images differ in size) with
  the exact torch ops of torch_ops.Chain;
- a batch's outputs and histograms are packed on the GPU and copied with one non_blocking copy
  into one of the worker's two pinned staging buffers;
- PNGs are written by cv2.imwrite (default parameters) on a pool of --threads CPU threads, while
  the worker goes on with its next batch in its other staging buffer.
The decoder is nvJPEG, not imgpipe's: decoded pixels may differ slightly between JPEG decoders,
so outputs are compared with the reference on the pixels nvJPEG produced.
"""

import concurrent.futures as cf
import os
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (first: it explains a missing numpy)
import numpy as np  # noqa: E402

SYSTEM = "torchvision-nvjpeg"


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    cores = len(os.sched_getaffinity(0))
    parser = common.make_parser(__doc__.splitlines()[0], modes=("files",), defaults={"streams": 2, "batch": 16})
    parser.add_argument("--threads", type=int, default=cores, help="PNG writer threads (default: cores, %(default)s)")
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
    writers = cf.ThreadPoolExecutor(args.threads)
    workers = cf.ThreadPoolExecutor(args.streams)
    groups = [list(range(i, min(i + args.batch, len(files)))) for i in range(0, len(files), args.batch)]
    failed = set()
    local = threading.local()

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

    def write(path, img):
        if not cv2.imwrite(path, img):
            raise RuntimeError(f"cannot write {path}")

    def worker_state():
        st = getattr(local, "st", None)
        if st is None:
            # per worker: a stream, two pinned staging buffers and the PNG writes reading each
            st = local.st = dict(stream=torch.cuda.Stream(), bufs=[None, None], writes=[[], []], n=0)
        return st

    def batch(k):
        """Reads, decodes and processes batch k; queues its PNG writes; returns its pixel count."""
        st = worker_state()
        idx = groups[k]
        datas = [read_bytes(files[i]) for i in idx]
        j = st["n"] % 2
        st["n"] += 1
        for f in st["writes"][j]:  # this staging buffer is free once its last batch is written
            f.result()
        with torch.cuda.stream(st["stream"]):
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
                st["writes"][j] = []
                return 0
            flat = torch.cat(parts + hists)
            buf = st["bufs"][j]
            if buf is None or buf.numel() < flat.numel():
                buf = st["bufs"][j] = torch.empty(max(flat.numel(), 1 << 24), dtype=torch.uint8, pin_memory=True)
            buf[: flat.numel()].copy_(flat, non_blocking=True)
        st["stream"].synchronize()
        host = buf.numpy()
        pos, futs = 0, []
        for i, w, h in layout:
            futs.append(writers.submit(write, outs[i], host[pos : pos + w * h].reshape(w, h)))
            pos += w * h
        st["writes"][j] = futs
        return pixels

    def drain():
        # every worker's outstanding writes; run once per worker thread at the end of a run
        st = worker_state()
        for fs in st["writes"]:
            for f in fs:
                f.result()
        st["writes"] = [[], []]

    def run():
        total = sum(workers.map(batch, range(len(groups))))
        barrier = threading.Barrier(args.streams)
        # one drain per worker thread: the barrier keeps each task on a different thread
        list(workers.map(lambda _: (barrier.wait(), drain()), range(args.streams)))
        return total

    pixels = []
    runs = common.timed_runs(lambda: pixels.append(run()), args.warmup, args.repeats, torch.cuda.synchronize)

    # Exactness of the chain on the first image, against the reference on nvJPEG's own pixels.
    img = decode_jpeg(torch.frombuffer(bytearray(read_bytes(files[0])), dtype=torch.uint8), mode=ImageReadMode.RGB, device=dev, apply_exif_orientation=True)
    t, hist = chain(img.unsqueeze(0), channels_last=False)
    want_t, want_h = common.ref_chain(img.permute(1, 2, 0).contiguous().cpu().numpy(), args.taps)
    exact = common.compare("exactness vs docs/semantics.md, first image", t[0].cpu().numpy(), hist[0].cpu().numpy(), want_t, want_h)[0]
    saved = cv2.imread(outs[0], cv2.IMREAD_UNCHANGED)
    if saved is None or not np.array_equal(saved, want_t):
        print(f"the saved {outs[0]} does not hold the expected image", file=sys.stderr)
        exact = False

    workers.shutdown()
    writers.shutdown()
    rec = common.record(
        SYSTEM,
        args,
        torch_ops.device_name(),
        runs,
        len(files) - len(failed),
        pixels[-1],
        exact,
        "decode: nvJPEG via torchvision (pixels may differ from imgpipe's decoder); chain: docs/semantics.md"
        " semantics exactly on the decoded pixels; save: cv2.imwrite PNG defaults on CPU threads,"
        " not atomic; --streams decode workers, each with its own CUDA stream and two pinned staging buffers",
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
