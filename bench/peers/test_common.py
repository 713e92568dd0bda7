"""Tests of the shared reference and helpers: python3 -m unittest in bench/peers (numpy needed)."""

import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import common  # noqa: E402


def slow_chain(rgb, taps):
    """docs/semantics.md written pixel by pixel, independently of the vectorised reference."""
    h, w, _ = rgb.shape
    r = len(taps) // 2
    gray = [[(9798 * int(p[0]) + 19235 * int(p[1]) + 3735 * int(p[2]) + 16384) >> 15 for p in row] for row in rgb]
    h16 = [[(sum(taps[i + r] * gray[y][min(max(x + i, 0), w - 1)] for i in range(-r, r + 1)) + 32) >> 6 for x in range(w)] for y in range(h)]
    out = [[(sum(taps[j + r] * h16[min(max(y + j, 0), h - 1)][x] for j in range(-r, r + 1)) + (1 << 21)) >> 22 for x in range(w)] for y in range(h)]
    t = np.array([[out[y][x] for y in range(h)] for x in range(w)], np.uint8)
    hist = np.zeros(256, np.uint64)
    for v in t.ravel():
        hist[v] += 1
    return t, hist


class TapsTest(unittest.TestCase):
    def test_taps_sum_symmetry_radius(self):
        for sigma in (0.1, 0.3, 0.5, 1.0, 1.5, 2.0, 3.3, 10.0, 32.0):
            taps = common.blur_taps(sigma)
            r = max(1, math.ceil(3 * sigma))
            self.assertEqual(len(taps), 2 * r + 1, sigma)
            self.assertEqual(sum(taps), 16384, sigma)
            self.assertEqual(taps, taps[::-1], sigma)
            self.assertEqual(max(taps), taps[r], sigma)

    def test_taps_sigma_1_5(self):
        # worked by hand from docs/semantics.md: r = 5, normalised Gaussian times 16384, rounded
        self.assertEqual(common.blur_taps(1.5), [17, 124, 590, 1792, 3490, 4358, 3490, 1792, 590, 124, 17])

    def test_bad_sigma(self):
        for sigma in (0, -1, 32.01, float("nan"), float("inf")):
            with self.assertRaises(common.UsageError):
                common.blur_taps(sigma)

    def test_round_half_away(self):
        cases = [(0.5, 1), (1.5, 2), (2.5, 3), (0.49999999999999994, 0), (2.4999, 2), (-0.5, -1), (-1.5, -2), (7.0, 7)]
        for x, want in cases:
            self.assertEqual(common.round_half_away(x), want, x)


class ReferenceTest(unittest.TestCase):
    def test_matches_pixel_by_pixel_version(self):
        rng = np.random.default_rng(3)
        for (w, h), sigma in [((1, 1), 1.5), ((2, 3), 1.5), ((7, 1), 0.5), ((13, 11), 1.5), ((20, 9), 3.0), ((5, 6), 0.2)]:
            rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            taps = common.blur_taps(sigma)
            t, hist = common.ref_chain(rgb, taps)
            want_t, want_h = slow_chain(rgb, taps)
            np.testing.assert_array_equal(t, want_t, err_msg=f"{w}x{h} sigma {sigma}")
            np.testing.assert_array_equal(hist, want_h)
            self.assertEqual(t.shape, (w, h))
            self.assertEqual(int(hist.sum()), w * h)

    def test_extremes(self):
        taps = common.blur_taps(1.5)
        for v in (0, 255):
            t, hist = common.ref_chain(np.full((9, 17, 3), v, np.uint8), taps)
            self.assertTrue((t == v).all())
            self.assertEqual(int(hist[v]), 9 * 17)

    def test_gray_weights(self):
        px = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255], [1, 2, 3]]], np.uint8)
        want = [(9798 * 255 + 16384) >> 15, (19235 * 255 + 16384) >> 15, (3735 * 255 + 16384) >> 15, 255,
                (9798 + 2 * 19235 + 3 * 3735 + 16384) >> 15]
        self.assertEqual(common.ref_gray(px)[0].tolist(), want)

    def test_gray_matches_opencv(self):
        try:
            import cv2
        except ImportError:
            self.skipTest("OpenCV not installed (Debian: python3-opencv)")
        rgb = np.random.default_rng(5).integers(0, 256, (64, 97, 3), dtype=np.uint8)
        np.testing.assert_array_equal(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), common.ref_gray(rgb))

    def test_compare_reports_mismatch(self):
        a = np.zeros((4, 3), np.uint8)
        b = a.copy()
        b[1, 2] = 3
        h = np.bincount(a.ravel(), minlength=256).astype(np.uint64)
        self.assertEqual(common.compare("x", a, h, a, h), (True, 0, 0))
        with open(os.devnull, "w") as devnull:
            stderr, sys.stderr = sys.stderr, devnull
            try:
                self.assertEqual(common.compare("x", b, h, a, h), (False, 1, 3))
                self.assertEqual(common.compare("x", a.T, h, a, h)[0], False)
            finally:
                sys.stderr = stderr


class InputsTest(unittest.TestCase):
    def test_pool_is_seeded_and_not_constant(self):
        a = common.fill_pool(np.empty((3, 8, 5, 3), np.uint8), 42)
        b = common.fill_pool(np.empty((3, 8, 5, 3), np.uint8), 42)
        c = common.fill_pool(np.empty((3, 8, 5, 3), np.uint8), 43)
        np.testing.assert_array_equal(a, b)
        self.assertFalse(np.array_equal(a, c))
        self.assertFalse(np.array_equal(a[0], a[1]))
        self.assertGreater(len(np.unique(a)), 100)
        # the documented generator, frame by frame
        rng = np.random.default_rng(42)
        for i in range(3):
            np.testing.assert_array_equal(a[i], rng.integers(0, 256, (8, 5, 3), np.uint8))

    def test_batches_and_spans(self):
        self.assertEqual(list(common.batches(10, 4)), [(0, 4), (4, 4), (8, 2)])
        self.assertEqual(list(common.pool_spans(0, 4, 8)), [(0, 4, 0)])
        self.assertEqual(list(common.pool_spans(6, 4, 8)), [(6, 2, 0), (0, 2, 2)])
        self.assertEqual(list(common.pool_spans(5, 7, 3)), [(2, 1, 0), (0, 3, 1), (0, 3, 4)])
        for first, count, pool in [(0, 64, 64), (60, 16, 64), (3, 100, 7)]:
            slots = [s + i for s, n, _ in common.pool_spans(first, count, pool) for i in range(n)]
            self.assertEqual(slots, [(first + i) % pool for i in range(count)])

    def test_parse_size(self):
        self.assertEqual(common.parse_size("1920x1080"), (1920, 1080))
        self.assertEqual(common.parse_size("1X1"), (1, 1))
        for bad in ("1920", "0x5", "5x-1", "axb", "20000x20000", "1x2x3"):
            with self.assertRaises(common.UsageError, msg=bad):
                common.parse_size(bad)

    def test_option_validation(self):
        p = common.make_parser("t", modes=("raw", "files"))
        ok = common.validate(p.parse_args(["--frames", "5", "--pool", "64"]))
        self.assertEqual(ok.pool, 5)  # never more distinct frames than frames
        bad = [["--frames", "0"], ["--batch", "0"], ["--streams", "0"], ["--repeats", "0"], ["--warmup", "-1"],
               ["--sigma", "0"], ["--size", "4x"], ["--size", "8000x8000", "--pool", "64"], ["--mode", "files"]]
        for argv in bad:
            with self.assertRaises(common.UsageError, msg=argv):
                common.validate(p.parse_args(argv))

    def test_list_images_and_out_path(self):
        import tempfile

        d = tempfile.mkdtemp()
        for rel in ("b/2.JPG", "b/1.jpeg", "a.jpg", "c.png", "z/y/x.jpg"):
            os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
            open(os.path.join(d, rel), "w").close()
        got = [os.path.relpath(p, d) for p in common.list_images(d)]
        self.assertEqual(got, ["a.jpg", "b/1.jpeg", "b/2.JPG", "z/y/x.jpg"])
        self.assertEqual(common.out_path("/o", d, os.path.join(d, "b/2.JPG")), "/o/b/2.png")
        with self.assertRaises(common.UsageError):
            common.list_images(os.path.join(d, "c.png"))
        with self.assertRaises(common.UsageError):
            common.list_images(os.path.join(d, "b"), exts=(".gif",))

    def test_record_fields(self):
        p = common.make_parser("t")
        args = common.validate(p.parse_args(["--frames", "10", "--size", "4x2"]))
        r = common.record("s", args, "dev", [2.0, 1.0, 3.0], 10, 80, True, "n", extra=1)
        self.assertEqual(r["median_s"], 2.0)
        self.assertEqual(r["img_per_s"], 5.0)
        self.assertEqual(r["mpix_per_s"], 40 / 1e6)
        self.assertEqual((r["width"], r["height"], r["chain"], r["extra"]), (4, 2, "grayscale|blur1.5|transpose|histogram", 1))

    def test_dump_frames_matches_pool(self):
        import tempfile

        path = os.path.join(tempfile.mkdtemp(), "f.rgb")
        with open(os.devnull, "w") as devnull:
            stderr, sys.stderr = sys.stderr, devnull
            try:
                common.dump_frames(["--size", "7x5", "--pool", "3", "--seed", "9", "--out", path])
            finally:
                sys.stderr = stderr
        got = np.fromfile(path, np.uint8).reshape(3, 5, 7, 3)
        np.testing.assert_array_equal(got, common.fill_pool(np.empty((3, 5, 7, 3), np.uint8), 9))

    def test_timed_runs(self):
        calls = []
        times = common.timed_runs(lambda: calls.append("run"), 2, 3, lambda: calls.append("sync"))
        self.assertEqual(len(times), 3)
        self.assertEqual(calls.count("run"), 5)
        self.assertTrue(calls[:2] == ["run", "run"])


if __name__ == "__main__":
    unittest.main()
