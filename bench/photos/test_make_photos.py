"""Tests of the photo planner and renderer: python3 -m unittest in bench/photos (Pillow needed)."""

import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    from PIL import Image, ImageChops, ImageOps

    import make_photos as mp
except ImportError:  # make_photos exits without Pillow; so does this test, with a skip
    mp = None


class FakeOriginal:
    def __init__(self, pkg, w, h, path=None):
        self.pkg, self.size, self.path, self.name = pkg, (w, h), path, f"{w}x{h}"


SIZES = [(mp_pkg, w, h) for mp_pkg, w, h in [
    ("lomiri-wallpapers-16.04", 5312, 2988), ("lomiri-wallpapers-16.04", 1365, 1074),
    ("lomiri-wallpapers-20.04", 6028, 3391), ("mate-backgrounds", 1280, 1024), ("mate-backgrounds", 2560, 1600),
    ("plasma-workspace-wallpapers", 2560, 1600), ("lomiri-wallpapers-16.04", 2056, 3088),
]]


@unittest.skipIf(mp is None, "Pillow not installed (Debian: python3-pil)")
class PlanTest(unittest.TestCase):
    def originals(self):
        return [FakeOriginal(*s) for s in SIZES]

    def test_deterministic(self):
        a = [(k, o.name, kind, p) for k, o, kind, p in mp.plan(self.originals(), 60, random.Random(1))]
        b = [(k, o.name, kind, p) for k, o, kind, p in mp.plan(self.originals(), 60, random.Random(1))]
        self.assertEqual(a, b)

    def test_sizes_and_crops_in_bounds(self):
        for k, o, kind, p in mp.plan(self.originals(), 300, random.Random(7)):
            w, h = o.size
            if "prescale" in p:
                self.assertLessEqual(p["prescale"][0], w)
                w, h = p["prescale"]
            if "crop" in p:
                cw, ch = p["crop"]
                self.assertTrue(0 < cw <= w and 0 < ch <= h, (k, kind, p, o.size))
                w, h = cw, ch
            if "size" in p:
                self.assertLessEqual(p["size"][0], w, (k, kind, p))  # never an upscale
                self.assertLessEqual(p["size"][1], h)
                w, h = p["size"]
            mpix = w * h / 1e6
            self.assertLessEqual(mpix, mp.MAX_MP + 0.01, (k, kind, p))
            # 1 MP at least, unless the original itself is smaller
            self.assertGreaterEqual(mpix, min(0.99 * mp.MIN_MP, o.size[0] * o.size[1] / 1e6), (k, kind, p, o.size))

    def test_mix(self):
        plan = mp.plan(self.originals(), 200, random.Random(2026))
        kinds = {kind for _, _, kind, _ in plan}
        self.assertEqual(kinds, {"full", "hd", "crop", "exif"})
        self.assertTrue(any(p.get("gray") for *_, p in plan))
        self.assertTrue(any(p["progressive"] for *_, p in plan))
        self.assertEqual({p["subsampling"] for *_, p in plan}, {0, 1, 2})
        self.assertEqual({p["orientation"] for *_, p in plan if "orientation" in p}, {3, 6, 8})

    def test_max_crop(self):
        self.assertEqual(mp.max_crop(4000, 3000, 4, 3, 1.0), (4000, 3000))
        self.assertEqual(mp.max_crop(4000, 3000, 1, 1, 0.5), (1500, 1500))
        cw, ch = mp.max_crop(1280, 1024, 3, 4, 0.7)  # a portrait crop that must widen to reach 1 MP
        self.assertGreaterEqual(cw * ch, 1e6)
        self.assertLessEqual(cw, 1280)
        self.assertLessEqual(ch, 1024)

    def test_render_orientation_round_trip(self):
        d = tempfile.mkdtemp()
        src = os.path.join(d, "src.png")
        im = Image.linear_gradient("L").resize((400, 300)).convert("RGB")
        im.putpixel((0, 0), (255, 0, 0))
        im.save(src)
        o = FakeOriginal("mate-backgrounds", 400, 300, src)
        for orient in (3, 6, 8):
            p = {"crop": (200, 300), "pos": (0.0, 0.0), "orientation": orient}
            stored, what = mp.render(o, "exif", p)
            self.assertIn(f"Orientation={orient}", what)
            # what a viewer shows: the stored pixels turned back by the tag
            stored.getexif()[0x0112] = orient
            shown = ImageOps.exif_transpose(stored)
            self.assertEqual(shown.size, (200, 300))
            self.assertIsNone(ImageChops.difference(shown, im.crop((0, 0, 200, 300))).getbbox(), orient)

    def test_render_copy_and_gray(self):
        o = FakeOriginal("mate-backgrounds", 400, 300, None)
        self.assertEqual(mp.render(o, "full", {}), (None, "copied as shipped"))
        d = tempfile.mkdtemp()
        src = os.path.join(d, "src.png")
        Image.new("RGB", (400, 300), (10, 200, 30)).save(src)
        o.path = src
        img, what = mp.render(o, "full", {"size": (200, 150), "gray": True, "pos": (0, 0)})
        self.assertEqual((img.mode, img.size), ("L", (200, 150)))
        self.assertIn("grayscale", what)


if __name__ == "__main__":
    unittest.main()
