#!/usr/bin/env python3
"""PyTorch, tuned: what a competent PyTorch user writes for the chain on raw frames.

- The frame pool lives in pinned (page-locked) host memory, so H2D copies are asynchronous DMA.
- S CUDA streams, batch k on stream k mod S, each stream with its own device input buffer and
  pinned output buffers, so one stream's copies overlap another's kernels.
- non_blocking copies in both directions; the host never waits inside a run.
- The chain is batched (one set of kernels per batch) with the same exact ops as torch_naive.py
  (torch_ops.Chain): separable conv2d with the integer taps in float32, one bincount per batch
  with a 256-per-image offset.
- cuDNN autotuning on, a warm-up run, then the median of timed runs, each closed by a synchronize.
- --compile wraps the chain in torch.compile, which fuses the elementwise ops (system name
  pytorch-tuned-compile).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402


def main():
    parser = common.make_parser(__doc__.splitlines()[0])
    parser.add_argument("--compile", action="store_true", help="wrap the chain in torch.compile")
    args = common.parse(parser)
    import torch

    import torch_ops

    system = "pytorch-tuned-compile" if args.compile else "pytorch-tuned"
    if not torch.cuda.is_available():
        print("error: no CUDA device visible to PyTorch", file=sys.stderr)
        return 3
    torch_ops.setup_exact_math()
    dev = torch.device("cuda")
    chain = torch_ops.Chain(args.sigma, dev)
    fn = torch.compile(chain.__call__, dynamic=False) if args.compile else chain
    if args.check:
        ok = torch_ops.check(fn, dev, common.CHECK_SIZES, args.taps)
        print(f"check {system}: {'all equal' if ok else 'MISMATCHES'}", file=sys.stderr)
        return 0 if ok else 1

    H, W, B, S, P = args.height, args.width, args.batch, args.streams, args.pool
    pool = torch.empty((P, H, W, 3), dtype=torch.uint8, pin_memory=True)
    common.fill_pool(pool.numpy(), args.seed)
    streams = [torch.cuda.Stream() for _ in range(S)]
    slots = [
        (
            torch.empty((B, H, W, 3), dtype=torch.uint8, device=dev),
            torch.empty((B, W, H), dtype=torch.uint8, pin_memory=True),
            torch.empty((B, 256), dtype=torch.int64, pin_memory=True),
        )
        for _ in range(S)
    ]

    def enqueue(k, first, n):
        # Stream order makes reuse of a slot safe: batch k+S on the same stream starts its H2D
        # only after batch k's D2H has been issued before it on that stream.
        d_in, h_out, h_hist = slots[k % S]
        with torch.cuda.stream(streams[k % S]):
            for slot, m, off in common.pool_spans(first, n, P):
                d_in[off : off + m].copy_(pool[slot : slot + m], non_blocking=True)
            t, hist = fn(d_in[:n])
            h_out[:n].copy_(t, non_blocking=True)
            h_hist[:n].copy_(hist, non_blocking=True)

    def run():
        for k, (first, n) in enumerate(common.batches(args.frames, B)):
            enqueue(k, first, n)

    runs = common.timed_runs(run, args.warmup, args.repeats, torch.cuda.synchronize)

    # Exactness of what was timed: the first batch through the same path, against the reference.
    n = min(B, args.frames)
    enqueue(0, 0, n)
    torch.cuda.synchronize()
    _, h_out, h_hist = slots[0]
    exact = True
    for i in {0, n - 1}:
        want_t, want_h = common.ref_chain(pool[i % P].numpy(), args.taps)
        exact &= common.compare(f"frame {i}", h_out[i].numpy(), h_hist[i].numpy(), want_t, want_h)[0]

    rec = common.record(
        system,
        args,
        torch_ops.device_name(),
        runs,
        args.frames,
        args.frames * W * H,
        exact,
        "the semantics of docs/semantics.md exactly (float32 convs on integer values, hi/lo byte split for the"
        " vertical pass, TF32 off); pinned pool, non_blocking copies, one slot per stream",
        torch=torch.__version__,
    )
    common.emit(rec, args.json)
    return 0


if __name__ == "__main__":
    common.main_guard(main)
