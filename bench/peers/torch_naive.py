#!/usr/bin/env python3
"""PyTorch, naive: the textbook flow, to compare with imgpipe's pinned multi-stream executor.

For each batch: torch.from_numpy(frames).cuda() from ordinary (pageable) numpy memory, which is a
synchronous copy; the chain's ops on the default stream; then .cpu() of the transposed images and
of the histograms, which waits for everything. One stream, no overlap of copies and kernels.
The ops are the same exact ones as torch_tuned.py (torch_ops.Chain), so the difference between the
two measures the memory and stream handling only.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (first: it explains a missing numpy)
import numpy as np  # noqa: E402

SYSTEM = "pytorch-naive"


def main():
    args = common.parse(common.make_parser(__doc__.splitlines()[0], defaults={"streams": 1}))
    import torch

    import torch_ops

    if not torch.cuda.is_available():
        print("error: no CUDA device visible to PyTorch", file=sys.stderr)
        return 3
    torch_ops.setup_exact_math()
    chain = torch_ops.Chain(args.sigma, torch.device("cuda"))
    if args.check:
        ok = torch_ops.check(chain, chain.device, common.CHECK_SIZES, args.taps)
        print(f"check {SYSTEM}: {'all equal' if ok else 'MISMATCHES'}", file=sys.stderr)
        return 0 if ok else 1

    pool = common.fill_pool(np.empty((args.pool, args.height, args.width, 3), np.uint8), args.seed)

    def batch_frames(first, n):
        spans = list(common.pool_spans(first, n, args.pool))
        if len(spans) == 1:
            s, k, _ = spans[0]
            return pool[s : s + k]
        return np.concatenate([pool[s : s + k] for s, k, _ in spans])

    def process(first, n):
        x = torch.from_numpy(batch_frames(first, n)).cuda()
        t, hist = chain(x)
        return t.cpu(), hist.cpu()

    def run():
        for first, n in common.batches(args.frames, args.batch):
            process(first, n)

    runs = common.timed_runs(run, args.warmup, args.repeats, torch.cuda.synchronize)

    # Exactness of what was timed: the first batch through the same path, against the reference.
    t, hist = process(0, min(args.batch, args.frames))
    exact = True
    for i in {0, t.shape[0] - 1}:
        want_t, want_h = common.ref_chain(pool[i % args.pool], args.taps)
        exact &= common.compare(f"frame {i}", t[i].numpy(), hist[i].numpy(), want_t, want_h)[0]

    args.streams = 1
    rec = common.record(
        SYSTEM,
        args,
        torch_ops.device_name(),
        runs,
        args.frames,
        args.frames * args.width * args.height,
        exact,
        "the semantics of docs/semantics.md exactly (float32 convs on integer values, hi/lo byte split for the"
        " vertical pass); pageable memory, synchronous copies, default stream only; --streams ignored",
        torch=torch.__version__,
    )
    common.emit(rec, args.json)
    return 0


if __name__ == "__main__":
    common.main_guard(main)
