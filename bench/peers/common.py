"""Shared pieces of the peer benchmarks: options, input frames, the numpy reference, JSON output.

Every peer script imports this file from its own folder, so that all of them parse the same
options, generate the same frames from the same seed, and print the same record schema.
The numpy reference below is written straight from docs/semantics.md and is what
each peer's output is checked against.
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

try:
    import numpy as np
except ImportError:  # every peer needs it; say how to get it instead of a traceback
    sys.exit(f"error: numpy is missing for {sys.executable} (Debian: apt-get install -y python3-numpy, then use /usr/bin/python3)")

CHAIN = "grayscale|blur{sigma:g}|transpose|histogram"

# Limits that are checked before anything is allocated.
MAX_PIXELS = 100_000_000  # same default as the decode stage's max_pixels
MAX_POOL_BYTES_DEFAULT = 4 << 30

GRAY_WEIGHTS = (9798, 19235, 3735)  # sum 32768; bit-exact with OpenCV RGB2GRAY on 8-bit


class UsageError(Exception):
    """A bad option value; the scripts print it and exit with status 2."""


# ---------------------------------------------------------------------------------------------
# Reference semantics (docs/semantics.md)


def round_half_away(x):
    """Rounds a non-negative float to the nearest integer, halves away from zero.

    floor(x + 0.5) is wrong for 0.49999999999999994 (the sum rounds up to 1.0), so the fraction
    is compared instead; x - floor(x) is exact for the magnitudes used here.
    """
    if x < 0:
        return -round_half_away(-x)
    f = math.floor(x)
    return int(f) + (1 if x - f >= 0.5 else 0)


def blur_taps(sigma):
    """Returns the 2r+1 integer Gaussian taps of docs/semantics.md for sigma, summing to exactly 16384."""
    if not (0 < sigma <= 32) or math.isnan(sigma):
        raise UsageError(f"sigma must be in (0, 32], got {sigma}")
    r = max(1, math.ceil(3 * sigma))
    g = [math.exp(-(i * i) / (2 * sigma * sigma)) for i in range(-r, r + 1)]
    s = 0.0
    for v in g:  # summed from -r to r, in order, as float64
        s += v
    w = [round_half_away(v / s * 16384) for v in g]
    w[r] += 16384 - sum(w)
    return w


def ref_gray(rgb):
    """Y = (9798 R + 19235 G + 3735 B + 16384) >> 15 on an (H, W, 3) uint8 array."""
    p = rgb.astype(np.uint32)
    y = (GRAY_WEIGHTS[0] * p[..., 0] + GRAY_WEIGHTS[1] * p[..., 1] + GRAY_WEIGHTS[2] * p[..., 2] + 16384) >> 15
    return y.astype(np.uint8)


def ref_blur(gray, taps):
    """Separable integer Gaussian of docs/semantics.md on an (H, W) uint8 array, replicate borders."""
    r = len(taps) // 2
    h, w = gray.shape
    p = np.pad(gray.astype(np.uint32), ((0, 0), (r, r)), mode="edge")
    acc = np.zeros((h, w), np.uint32)
    for i, t in enumerate(taps):
        acc += np.uint32(t) * p[:, i : i + w]
    h16 = ((acc + 32) >> 6).astype(np.uint32)  # fits uint16
    p = np.pad(h16, ((r, r), (0, 0)), mode="edge")
    acc = np.zeros((h, w), np.uint32)
    for j, t in enumerate(taps):
        acc += np.uint32(t) * p[j : j + h, :]
    return ((acc + (1 << 21)) >> 22).astype(np.uint8)


def ref_chain(rgb, taps):
    """gray | blur | transpose | histogram on one (H, W, 3) frame: returns ((W, H) uint8, 256 uint64)."""
    out = ref_blur(ref_gray(rgb), taps)
    t = np.ascontiguousarray(out.T)
    hist = np.bincount(t.ravel(), minlength=256).astype(np.uint64)
    return t, hist


def compare(name, got_img, got_hist, want_img, want_hist):
    """Compares one peer output with the reference; returns (ok, mismatched pixels, max |diff|)."""
    got_img = np.asarray(got_img)
    if got_img.shape != want_img.shape:
        print(f"check {name}: shape {got_img.shape}, want {want_img.shape}", file=sys.stderr)
        return False, want_img.size, 255
    diff = np.abs(got_img.astype(np.int16) - want_img.astype(np.int16))
    bad = int(np.count_nonzero(diff))
    maxd = int(diff.max()) if diff.size else 0
    hist_ok = np.array_equal(np.asarray(got_hist).astype(np.uint64), want_hist)
    ok = bad == 0 and hist_ok
    if not ok:
        where = np.argwhere(diff)[:5].tolist()
        print(
            f"check {name}: {bad}/{diff.size} pixels differ (max {maxd}, first at {where}),"
            f" histogram {'equal' if hist_ok else 'differs'}",
            file=sys.stderr,
        )
    return ok, bad, maxd


# Sizes used by --check: tiny, odd, thinner than the blur radius, and not multiples of any tile.
CHECK_SIZES = [(1, 1), (2, 3), (3, 1), (1, 7), (17, 9), (64, 33), (37, 201), (255, 129)]


# ---------------------------------------------------------------------------------------------
# Inputs


def parse_size(s):
    """Parses WxH into (W, H), refusing anything non-positive or over MAX_PIXELS."""
    try:
        w, h = (int(v) for v in s.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size must be WxH, like 1920x1080, got {s!r}") from None
    if w <= 0 or h <= 0:
        raise UsageError(f"--size {s}: width and height must be positive")
    if w * h > MAX_PIXELS:
        raise UsageError(f"--size {s}: {w * h} pixels is over the limit of {MAX_PIXELS}")
    return w, h


def fill_pool(dst, seed):
    """Fills dst, shaped (P, H, W, 3) uint8, with the shared random frames for seed.

    Frame i is the i-th draw of default_rng(seed).integers(0, 256, (H, W, 3), uint8); every
    script uses this function, so every system sees identical frames.
    """
    rng = np.random.default_rng(seed)
    _, h, w, c = dst.shape
    for i in range(dst.shape[0]):
        dst[i] = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
    return dst


def batches(frames, batch):
    """Yields (first, count) of each batch of the run: frames [first, first+count)."""
    for first in range(0, frames, batch):
        yield first, min(batch, frames - first)


def pool_spans(first, count, pool):
    """Splits frames [first, first+count) into runs of consecutive pool slots.

    Frame i is pool slot i % pool, so a batch that wraps around the pool end is two (or more)
    contiguous pieces; yields (slot, n, offset within the batch).
    """
    done = 0
    while done < count:
        slot = (first + done) % pool
        n = min(count - done, pool - slot)
        yield slot, n, done
        done += n


def list_images(root, exts=(".jpg", ".jpeg")):
    """Returns the image files under root, recursively, in a deterministic (sorted) order."""
    if not os.path.isdir(root):
        raise UsageError(f"--input {root}: not a folder")
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            if f.lower().endswith(exts):
                out.append(os.path.join(d, f))
    if not out:
        raise UsageError(f"--input {root}: no {'/'.join(exts)} files found")
    return out


def out_path(out_dir, in_dir, path, ext=".png"):
    """The output path for an input: its relative path under out_dir with the extension replaced."""
    rel = os.path.relpath(path, in_dir)
    return os.path.join(out_dir, os.path.splitext(rel)[0] + ext)


# ---------------------------------------------------------------------------------------------
# Options


def make_parser(description, modes=("raw",), defaults=None):
    """The option set every peer shares; modes lists the modes the script supports."""
    d = dict(size="1920x1080", frames=1024, batch=16, streams=4, sigma=1.5, warmup=1, repeats=5)
    d.update(defaults or {})
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--mode", choices=modes, default=modes[0], help="raw frames or a folder of JPEG files")
    p.add_argument("--size", default=d["size"], help="frame size WxH for raw mode (default %(default)s)")
    p.add_argument("--frames", type=int, default=d["frames"], help="frames per timed run, raw mode (default %(default)s)")
    p.add_argument("--batch", type=int, default=d["batch"], help="images per batch (default %(default)s)")
    p.add_argument("--streams", type=int, default=d["streams"], help="CUDA streams (default %(default)s)")
    p.add_argument("--sigma", type=float, default=d["sigma"], help="Gaussian sigma, 0 < sigma <= 32 (default %(default)s)")
    p.add_argument("--warmup", type=int, default=d["warmup"], help="untimed runs before timing (default %(default)s)")
    p.add_argument("--repeats", type=int, default=d["repeats"], help="timed runs; the median is reported (default %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="seed of the random frames (default %(default)s)")
    p.add_argument("--pool", type=int, default=64, help="distinct frames cycled through (default %(default)s)")
    p.add_argument("--max-pool-mb", type=int, default=MAX_POOL_BYTES_DEFAULT >> 20, help="refuse a frame pool larger than this (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line on stdout")
    p.add_argument("--check", action="store_true", help="compare with the numpy reference on small frames, then exit")
    if "files" in modes:
        p.add_argument("--input", help="folder of JPEG files (files mode)")
        p.add_argument("--output", help="folder for the PNG outputs (files mode; default: a temporary folder)")
    return p


def validate(args):
    """Checks the shared options; raises UsageError with a message naming the option."""
    for name in ("frames", "batch", "streams", "repeats", "pool"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.warmup < 0:
        raise UsageError(f"--warmup must be at least 0, got {args.warmup}")
    args.taps = blur_taps(args.sigma)
    args.width, args.height = parse_size(args.size)
    if args.mode == "raw":
        pool = min(args.pool, args.frames)
        need = pool * args.width * args.height * 3
        if need > args.max_pool_mb << 20:
            raise UsageError(
                f"frame pool of {pool} x {args.size} needs {need >> 20} MiB, over --max-pool-mb {args.max_pool_mb}"
            )
        args.pool = pool
    elif args.mode == "files" and not getattr(args, "input", None):
        raise UsageError("files mode needs --input DIR")
    return args


def parse(parser, argv=None):
    """Parses and validates; on a bad value prints the error and exits 2 like argparse does."""
    args = parser.parse_args(argv)
    try:
        return validate(args)
    except UsageError as e:
        parser.error(str(e))


# ---------------------------------------------------------------------------------------------
# Timing and output


def timed_runs(run, warmup, repeats, sync=lambda: None):
    """Runs run() warmup times untimed, then repeats times timed; returns the seconds of each.

    sync() is called before starting and before stopping each clock, so queued GPU work is inside
    the measured interval.
    """
    for _ in range(warmup):
        run()
    sync()
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - t0)
    return times


def cpu_name():
    """The CPU model and the number of usable cores, for the device field of CPU peers."""
    name = platform.processor() or "CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{name} ({len(os.sched_getaffinity(0))} cores)"


def record(system, args, device, runs, images, pixels, exact, note, **extra):
    """Builds the shared result record; pixels is the total over one run."""
    med = statistics.median(runs)
    rec = {
        "system": system,
        "mode": args.mode,
        "device": device,
        "chain": CHAIN.format(sigma=args.sigma),
        "width": args.width if args.mode == "raw" else None,
        "height": args.height if args.mode == "raw" else None,
        "frames": images,
        "batch": args.batch,
        "streams": args.streams,
        "median_s": med,
        "runs_s": runs,
        "img_per_s": images / med,
        "mpix_per_s": pixels / med / 1e6,
        "exact": bool(exact),
        "note": note,
    }
    rec.update(extra)
    return rec


def emit(rec, as_json):
    """Prints the record: one JSON line on stdout with --json, and always a summary on stderr."""
    if as_json:
        print(json.dumps(rec), flush=True)
    print(
        f"{rec['system']} {rec['mode']} on {rec['device']}: {rec['img_per_s']:.1f} img/s,"
        f" {rec['mpix_per_s']:.0f} MP/s (median of {len(rec['runs_s'])}, {rec['median_s']:.4f} s),"
        f" streams {rec['streams']}, batch {rec['batch']}, exact {rec['exact']}",
        file=sys.stderr,
    )


def main_guard(fn):
    """Runs fn(), turning a UsageError raised late (e.g. no JPEG files) into exit status 2."""
    try:
        sys.exit(fn())
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


def dump_frames(argv=None):
    """`python3 common.py --size WxH --pool P --seed S --out FILE`: the shared frames as raw RGB.

    Writes the P frames of fill_pool back to back (P x H x W x 3 bytes, row-major, RGB), so
    another tool (imgpipe, for one) can read exactly the frames the peers use.
    """
    p = argparse.ArgumentParser(description="write the shared random frames as raw RGB bytes")
    p.add_argument("--size", default="1920x1080")
    p.add_argument("--pool", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    try:
        w, h = parse_size(a.size)
        if a.pool < 1:
            raise UsageError(f"--pool must be at least 1, got {a.pool}")
        if a.pool * w * h * 3 > MAX_POOL_BYTES_DEFAULT:
            raise UsageError(f"{a.pool} frames of {a.size} are over {MAX_POOL_BYTES_DEFAULT >> 20} MiB")
    except UsageError as e:
        p.error(str(e))
    rng = np.random.default_rng(a.seed)
    with open(a.out, "wb") as f:
        for _ in range(a.pool):
            f.write(rng.integers(0, 256, (h, w, 3), dtype=np.uint8).tobytes())
    print(f"{a.pool} frames of {w}x{h} RGB, seed {a.seed}, in {a.out}", file=sys.stderr)


if __name__ == "__main__":
    dump_frames()
