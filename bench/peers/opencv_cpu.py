#!/usr/bin/env python3
"""OpenCV on the CPU: the chain as a competent OpenCV user writes it, on raw frames or a folder.

Per image: cvtColor (RGB2GRAY for raw RGB frames, BGR2GRAY after imread, both bit-exact with
docs/semantics.md), GaussianBlur with ksize 2r+1, the same sigma and BORDER_REPLICATE, cv2.transpose,
calcHist with 256 bins; in files mode cv2.imread (which applies EXIF orientation) first and
cv2.imwrite of a PNG with default parameters last.
Images are spread over a pool of --threads threads (OpenCV releases the GIL), each running OpenCV
with --cv-threads internal threads (default 1 when the pool has more than one thread, so the two
levels do not oversubscribe the cores).
GaussianBlur on 8-bit images uses OpenCV's own fixed-point taps, not docs/semantics.md's 14-bit ones, so
the blur is the nearest equivalent: it differs by 1 on some pixels; the run measures how many.
"""

import concurrent.futures as cf
import os
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  (first: it explains a missing numpy)
import numpy as np  # noqa: E402

SYSTEM = "opencv-cpu"


class Chain:
    """The OpenCV calls of the chain, with the kernel size derived from sigma as docs/semantics.md does."""

    def __init__(self, cv2, taps, sigma):
        self.cv2 = cv2
        self.k = len(taps)
        self.sigma = sigma

    def __call__(self, img, code, out=None):
        """img: RGB (code RGB2GRAY) or BGR (code BGR2GRAY) uint8; returns (transposed, 256 counts)."""
        cv2 = self.cv2
        g = cv2.cvtColor(img, code)
        b = cv2.GaussianBlur(g, (self.k, self.k), self.sigma, sigmaY=self.sigma, borderType=cv2.BORDER_REPLICATE)
        t = cv2.transpose(b, dst=out)
        h = cv2.calcHist([t], [0], None, [256], [0, 256])
        return t, h.ravel().astype(np.uint64)


def mismatch_note(chain, cv2, img, code, taps):
    """Compares one image's output with the reference and describes the difference."""
    t, h = chain(img, code)
    rgb = img if code == cv2.COLOR_RGB2GRAY else img[..., ::-1]
    want_t, want_h = common.ref_chain(np.ascontiguousarray(rgb), taps)
    ok, bad, maxd = common.compare("exactness vs docs/semantics.md, first image", t, h, want_t, want_h)
    if ok:
        return True, "bit-exact with docs/semantics.md on the first image"
    return False, (
        f"blur is OpenCV's fixed-point GaussianBlur (its own tap rounding): {100.0 * bad / want_t.size:.2f}%"
        f" of the first image's pixels differ from docs/semantics.md, by at most {maxd}; gray, transpose and"
        " histogram follow docs/semantics.md"
    )


def run_check(cv2, chain, taps):
    """Small odd frames: gray must be exact, the blur within 1; prints the mismatch rate."""
    rng = np.random.default_rng(7)
    ok = True
    bad = total = 0
    for w, h in common.CHECK_SIZES:
        frame = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        if not np.array_equal(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY), common.ref_gray(frame)):
            print(f"check {w}x{h}: cvtColor differs from the docs/semantics.md grayscale", file=sys.stderr)
            ok = False
        t, _ = chain(frame, cv2.COLOR_RGB2GRAY)
        want_t, _ = common.ref_chain(frame, taps)
        d = np.abs(t.astype(np.int16) - want_t.astype(np.int16)) if t.shape == want_t.shape else None
        if d is None or d.max(initial=0) > 1:
            print(f"check {w}x{h}: output shape or blur differs by more than 1", file=sys.stderr)
            ok = False
        else:
            bad += int(np.count_nonzero(d))
            total += d.size
    print(
        f"check {SYSTEM}: grayscale exact, blur within 1 of docs/semantics.md: {ok};"
        f" {bad}/{total} pixels differ by 1 (OpenCV's own fixed-point taps)",
        file=sys.stderr,
    )
    return ok


def main():
    cores = len(os.sched_getaffinity(0))
    parser = common.make_parser(__doc__.splitlines()[0], modes=("raw", "files"), defaults={"streams": 1, "batch": 1})
    parser.add_argument("--threads", type=int, default=cores, help="images processed at once (default: cores, %(default)s)")
    parser.add_argument("--cv-threads", type=int, default=None, help="cv2.setNumThreads (default 1 if --threads > 1, else cores)")
    args = common.parse(parser)
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    if args.cv_threads is None:
        args.cv_threads = 1 if args.threads > 1 else cores
    if args.cv_threads < 0:
        parser.error(f"--cv-threads must be at least 0, got {args.cv_threads}")
    try:
        import cv2
    except ImportError as e:
        print(f"error: OpenCV is not available ({e}); on Debian: apt-get install -y python3-opencv", file=sys.stderr)
        return 3
    cv2.setNumThreads(args.cv_threads)
    chain = Chain(cv2, args.taps, args.sigma)
    if args.check:
        return 0 if run_check(cv2, chain, args.taps) else 1
    pool_exec = cf.ThreadPoolExecutor(args.threads)
    extra = dict(threads=args.threads, cv_threads=args.cv_threads, opencv=cv2.__version__)
    args.streams = 1
    if args.mode == "raw":
        rec = run_raw(args, cv2, chain, pool_exec, extra)
    else:
        rec = run_files(args, cv2, chain, pool_exec, extra)
    pool_exec.shutdown()
    common.emit(rec, args.json)
    return 0


def run_raw(args, cv2, chain, ex, extra):
    """Raw frames from the shared pool; outputs go to per-thread buffers, histograms are kept."""
    H, W, P = args.height, args.width, args.pool
    pool = common.fill_pool(np.empty((P, H, W, 3), np.uint8), args.seed)
    hists = np.zeros((args.frames, 256), np.uint64)
    local = threading.local()

    def work(first, n):
        out = getattr(local, "out", None)
        if out is None:
            out = local.out = np.empty((W, H), np.uint8)
        for i in range(first, first + n):
            _, hists[i] = chain(pool[i % P], cv2.COLOR_RGB2GRAY, out)

    # Chunks of --batch frames; a few chunks per thread keep the threads evenly loaded.
    chunk = max(1, min(args.batch, args.frames // (args.threads * 4) or 1))

    def run():
        list(ex.map(lambda b: work(*b), common.batches(args.frames, chunk)))

    runs = common.timed_runs(run, args.warmup, args.repeats)
    exact, note = mismatch_note(chain, cv2, pool[0], cv2.COLOR_RGB2GRAY, args.taps)
    args.batch = chunk
    return common.record(SYSTEM, args, common.cpu_name(), runs, args.frames, args.frames * W * H, exact, note, **extra)


def run_files(args, cv2, chain, ex, extra):
    """A folder of JPEGs: imread, the chain, imwrite PNG, one file per task."""
    files = common.list_images(args.input)
    out_dir = args.output or tempfile.mkdtemp(prefix="opencv-peer-")
    for d in sorted({os.path.dirname(common.out_path(out_dir, args.input, f)) for f in files}):
        os.makedirs(d, exist_ok=True)

    def work(path):
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        if img is None:
            raise RuntimeError(f"cannot decode {path}")
        t, h = chain(img, cv2.COLOR_BGR2GRAY)
        if not cv2.imwrite(common.out_path(out_dir, args.input, path), t):
            raise RuntimeError(f"cannot write the output of {path}")
        return img.shape[0] * img.shape[1]

    pixels = []

    def run():
        pixels.append(sum(ex.map(work, files)))

    runs = common.timed_runs(run, args.warmup, args.repeats)
    first = cv2.imread(files[0], cv2.IMREAD_COLOR)
    exact, note = mismatch_note(chain, cv2, first, cv2.COLOR_BGR2GRAY, args.taps)
    note = "decode: libjpeg-turbo via cv2.imread (not Go's decoder); save: cv2.imwrite PNG defaults; " + note
    args.batch = 1
    return common.record(
        SYSTEM, args, common.cpu_name(), runs, len(files), pixels[-1], exact, note, output=out_dir, megapixels=pixels[-1] / 1e6, **extra
    )


if __name__ == "__main__":
    common.main_guard(main)
