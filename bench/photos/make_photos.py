#!/usr/bin/env python3
"""Builds the benchmark photo folder from the photographs shipped in extracted Debian packages.

Called by fetch.sh, which downloads and extracts the packages. Deterministic: the same packages
and the same options give the same files, byte for byte (Pillow's JPEG encoder is deterministic).

Each output is one real photograph, either copied as shipped or re-encoded after a crop or a
downscale (never an upscale), so the set has the variety a real photo folder has: sizes from 1 to
12 MP, landscape and portrait, baseline and progressive, 4:2:0 / 4:2:2 / 4:4:4 chroma, a few
grayscale JPEGs, and some files whose pixels are stored rotated with an EXIF Orientation tag, as
cameras write them. SOURCES.tsv records, for every file, the package, the original, its author
and licence, and what was done to it.
"""

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import sys

try:
    from PIL import Image
except ImportError:
    sys.exit("error: Pillow is missing; on Debian: apt-get install -y python3-pil")

MIN_MP, MAX_MP = 1.0, 12.0

# Package, folder (under the package root), file, author, licence. Only photographs are listed:
# the packages also ship renders and illustrations, which are left out on purpose.
LOMIRI16 = "lomiri-wallpapers-16.04"
LOMIRI20 = "lomiri-wallpapers-20.04"
MATE = "mate-backgrounds"
PLASMA = "plasma-workspace-wallpapers"

ORIGINALS = [
    (LOMIRI16, "usr/share/backgrounds", "Bridge_by_Sander_Klootwijk.jpg", "Sander Klootwijk", "CC-BY-SA-4.0"),
    (LOMIRI16, "usr/share/backgrounds", "Dragonfly_by_Bolly.jpg", '"Bolly"', "CC-BY-SA-4.0"),
    (LOMIRI16, "usr/share/backgrounds", "Picture_0B_by_freespace.jpg", 'Trevor "Freespace"', "CC-BY-4.0"),
    (LOMIRI16, "usr/share/backgrounds", "Picture_1A_by_freespace.jpg", 'Trevor "Freespace"', "CC-BY-4.0"),
    (LOMIRI16, "usr/share/backgrounds", "Wine_by_Jakkub_Mede.jpg", "Jakub Mede", "CC-BY-4.0"),
    (LOMIRI16, "usr/share/backgrounds", "aitzgorri_by_Aitzol_Berasategi.jpg", "Aitzol Berasategi", "CC-BY-4.0"),
    (LOMIRI16, "usr/share/backgrounds", "free_by_Peter_Nerlich.jpg", "Peter Nerlich", "CC-BY-SA-4.0"),
    (LOMIRI16, "usr/share/backgrounds", "friends_by_Aitzol_Berasategi.jpg", "Aitzol Berasategi", "CC-BY-4.0"),
    (LOMIRI16, "usr/share/backgrounds", "greentock_by_Peter_Nerlich.jpg", "Peter Nerlich", "CC-BY-SA-4.0"),
    (LOMIRI16, "usr/share/backgrounds", "life_by_Aitzol_Berasategi.jpg", "Aitzol Berasategi", "CC-BY-4.0"),
    (LOMIRI16, "usr/share/backgrounds", "picosdeeuropa_by_Aitzol_Berasategi.jpg", "Aitzol Berasategi", "CC-BY-4.0"),
    (LOMIRI16, "usr/share/backgrounds", "seeding_by_Clements_Engelhardt.jpg", "Clemens Engelhardt", "CC0-1.0"),
    (LOMIRI16, "usr/share/backgrounds", "sunset_by_Aitzol_Berasategi.jpg", "Aitzol Berasategi", "CC-BY-4.0"),
    (LOMIRI20, "usr/share/backgrounds", "Kleiber_by_Lukas_Baubkus.jpg", "Lukas Baubkus", "CC-BY-SA-3.0"),
    (MATE, "usr/share/backgrounds/mate/nature", "Aqua.jpg", "Charles Barbin", "GPL-2+"),
    (MATE, "usr/share/backgrounds/mate/nature", "Blinds.jpg", "Lennart Poettering", "GPL-2+"),
    (MATE, "usr/share/backgrounds/mate/nature", "Dune.jpg", "Marco Cogoni", "GPL-2+"),
    (MATE, "usr/share/backgrounds/mate/nature", "FreshFlower.jpg", "Jens Ansorg", "GPL-2+"),
    (MATE, "usr/share/backgrounds/mate/nature", "Garden.jpg", "Charles Barbin", "GPL-2+"),
    (MATE, "usr/share/backgrounds/mate/nature", "GreenMeadow.jpg", "Timothy Schellhase", "GPL-2+"),
    (MATE, "usr/share/backgrounds/mate/nature", "LadyBird.jpg", "Charles Barbin", "GPL-2+"),
    (MATE, "usr/share/backgrounds/mate/nature", "RainDrops.jpg", '"blackcombwhistler07"', "GPL-2+"),
    (MATE, "usr/share/backgrounds/mate/nature", "Storm.jpg", "Sergey Nazarov", "GPL-2+"),
    (MATE, "usr/share/backgrounds/mate/nature", "TwoWings.jpg", "Charles Barbin", "GPL-2+"),
    (MATE, "usr/share/backgrounds/mate/nature", "Wood.jpg", "Jean-François Fortin Tam", "GPL-2+"),
    (MATE, "usr/share/backgrounds/mate/nature", "YellowFlower.jpg", "Charles Barbin", "GPL-2+"),
]
# Plasma wallpapers: the author is read from each metadata.json; upstream says LGPLv3 there,
# Debian's copyright file says GPL-2+ for the whole package; both are recorded.
PLASMA_PHOTOS = [
    "BytheWater", "ColdRipple", "ColorfulCups", "DarkestHour", "EveningGlow", "FallenLeaf",
    "Grey", "Kite", "OneStandsOut", "Path", "summer_1am",
]  # fmt: skip


class Original:
    """One source photograph and where it came from."""

    def __init__(self, pkg, version, root, rel, author, licence):
        self.pkg, self.version, self.rel, self.author, self.licence = pkg, version, rel, author, licence
        self.path = os.path.join(root, rel)
        self.name = os.path.splitext(os.path.basename(rel))[0]
        if pkg == PLASMA:
            self.name = rel.split("/")[3]
        with Image.open(self.path) as im:
            self.size = im.size


def load_originals(extract, versions):
    """Finds every listed photograph under the extracted package folders; all must be there."""
    out = []
    for pkg, folder, f, author, licence in ORIGINALS:
        out.append(Original(pkg, versions[pkg], os.path.join(extract, pkg), f"{folder}/{f}", author, licence))
    for name in PLASMA_PHOTOS:
        base = os.path.join(extract, PLASMA, "usr/share/wallpapers", name)
        with open(os.path.join(base, "metadata.json"), encoding="utf-8") as fh:
            meta = json.load(fh)["KPlugin"]
        imgs = os.listdir(os.path.join(base, "contents/images"))
        # the largest rendition is the original; the others are the packager's downscales
        best = max(imgs, key=lambda s: math.prod(int(v) for v in os.path.splitext(s)[0].split("x")))
        lic = f"{meta.get('License', '?')} (upstream metadata); GPL-2+ (Debian copyright)"
        out.append(
            Original(PLASMA, versions[PLASMA], os.path.join(extract, PLASMA), f"usr/share/wallpapers/{name}/contents/images/{best}", meta["Authors"][0]["Name"], lic)
        )
    return out


def fit_mp(w, h, mp):
    """The size with w:h's aspect and about mp megapixels, never larger than (w, h)."""
    s = min(1.0, math.sqrt(mp * 1e6 / (w * h)))
    return max(1, round(w * s)), max(1, round(h * s))


def target_mp(rng):
    """Draws a photo size: mostly 1-2.1 MP like a web or phone export, some up to 12 MP.

    The mix keeps 200 photos near 50 MB at these encodings (about 0.13 bytes per pixel).
    """
    u = rng.random()
    if u < 0.04:
        return rng.uniform(4.5, MAX_MP)
    if u < 0.16:
        return rng.uniform(2.1, 4.5)
    return rng.uniform(MIN_MP, 2.1)


def max_crop(w, h, aw, ah, f):
    """The largest aw:ah region of a (w, h) image, scaled by f, but at least MIN_MP where possible."""
    s = min(w / aw, h / ah) * f
    cw, ch = max(1, round(aw * s)), max(1, round(ah * s))
    if cw * ch < MIN_MP * 1e6:
        g = min(math.sqrt(MIN_MP * 1e6 / (cw * ch)), w / cw, h / ch)
        cw, ch = min(w, math.ceil(cw * g)), min(h, math.ceil(ch * g))
    if cw * ch < MIN_MP * 1e6:  # the aspect cannot reach MIN_MP inside this image: widen it
        cw = min(w, math.ceil(MIN_MP * 1e6 / ch))
        ch = min(h, math.ceil(MIN_MP * 1e6 / cw))
    return cw, ch


def plan(originals, count, rng):
    """Chooses what each output is: (index, original, kind, params); deterministic for rng."""
    kinds = ["full", "hd", "crop", "exif", "full", "crop"]
    out = []
    for k in range(count):
        o = originals[k % len(originals)]
        kind = kinds[(k // len(originals)) % len(kinds)]
        w, h = o.size
        t = target_mp(rng)
        if k < len(originals) and kind == "full" and o.pkg in (LOMIRI16, LOMIRI20) and k % 2 == 0:
            t = rng.uniform(6.0, MAX_MP)  # a few camera-sized photos from the large originals
        p = {}
        if kind == "hd" and (w < 1920 or h < 1080):
            kind = "full"
        if kind == "full":
            if w * h > t * 1.15e6 or w * h > MAX_MP * 1e6:
                p["size"] = fit_mp(w, h, min(t, MAX_MP))
        elif kind == "hd":
            # a 1080p frame out of the picture scaled to 1-1.5x that size, so it looks like one
            s = min(1.0, max(1920 / w, 1080 / h) * rng.uniform(1.0, 1.5))
            p["prescale"] = (max(1920, round(w * s)), max(1080, round(h * s)))
            p["crop"] = (1920, 1080)
        elif kind == "crop":
            aw, ah = rng.choice([(4, 3), (3, 2), (1, 1), (16, 9), (3, 4), (2, 3)])
            p["crop"] = max_crop(w, h, aw, ah, rng.uniform(0.6, 1.0))
            p["size"] = fit_mp(*p["crop"], t)
        elif kind == "exif":
            p["crop"] = max_crop(w, h, 3, 4, rng.uniform(0.7, 1.0))  # portrait, stored rotated
            p["size"] = fit_mp(*p["crop"], t)
            p["orientation"] = rng.choice([6, 8, 3])
        p["gray"] = k % 23 == 5
        if p["gray"] and kind == "full" and "size" not in p:
            p["size"] = (w, h)  # re-encoded, so it can be made gray
        p["quality"] = rng.choice([75, 80, 85, 90])
        p["subsampling"] = rng.choice([0, 1, 2, 2, 2])  # 4:4:4, 4:2:2, 4:2:0 (the commonest)
        p["progressive"] = rng.random() < 0.25
        p["pos"] = (rng.random(), rng.random())
        out.append((k, o, kind, p))
    return out


def render(o, kind, p):
    """Makes the output image (or None to copy the original's bytes); returns (image, description)."""
    if kind == "full" and "size" not in p:
        return None, "copied as shipped"
    im = Image.open(o.path)
    im = im.convert("RGB")
    steps = []
    if "prescale" in p:
        im = im.resize(p["prescale"], Image.LANCZOS)
        steps.append(f"downscale to {p['prescale'][0]}x{p['prescale'][1]}")
    if "crop" in p:
        cw, ch = p["crop"]
        x = round((im.width - cw) * p["pos"][0])
        y = round((im.height - ch) * p["pos"][1])
        im = im.crop((x, y, x + cw, y + ch))
        steps.append(f"crop {cw}x{ch}+{x}+{y}")
    if "size" in p and p["size"] != im.size:
        im = im.resize(p["size"], Image.LANCZOS)
        steps.append(f"downscale to {p['size'][0]}x{p['size'][1]}")
    if p.get("gray"):
        im = im.convert("L")
        steps.append("grayscale JPEG")
    if "orientation" in p:
        # Orientation 6 means "rotate 90 clockwise to display", so the stored pixels are the
        # displayed image turned 90 counter-clockwise (8: the other way; 3: upside down).
        turn = {6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270, 3: Image.Transpose.ROTATE_180}
        im = im.transpose(turn[p["orientation"]])
        steps.append(f"stored rotated, EXIF Orientation={p['orientation']}")
    return im, "; ".join(steps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extract", required=True, help="folder holding one extracted folder per package")
    ap.add_argument("--versions", required=True, help="JSON object: package name -> version")
    ap.add_argument("--out", required=True, help="output folder (created; must be empty or absent)")
    ap.add_argument("--count", type=int, default=200, help="number of photos (default %(default)s)")
    ap.add_argument("--max-mb", type=float, default=60, help="refuse a set larger than this (default %(default)s)")
    ap.add_argument("--seed", type=int, default=2026, help="seed of the crop/size choices (default %(default)s)")
    a = ap.parse_args()
    if a.count < 1:
        ap.error("--count must be at least 1")
    if os.path.isdir(a.out) and os.listdir(a.out):
        ap.error(f"--out {a.out} is not empty; give a new folder")
    versions = json.loads(a.versions)
    originals = load_originals(a.extract, versions)
    rng = random.Random(a.seed)
    rows = []
    tmp = a.out + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    total = 0
    for k, o, kind, p in plan(originals, a.count, rng):
        sub = {LOMIRI16: "lomiri", LOMIRI20: "lomiri", MATE: "mate", PLASMA: "plasma"}[o.pkg]
        rel = f"{sub}/{k:03d}_{o.name}_{kind}.jpg"
        dst = os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        im, what = render(o, kind, p)
        if im is None:
            shutil.copyfile(o.path, dst)
            w, h = o.size
        else:
            kw = dict(quality=p["quality"], optimize=False, progressive=p["progressive"])
            if im.mode == "RGB":
                kw["subsampling"] = p["subsampling"]
            if "orientation" in p:
                exif = Image.Exif()
                exif[0x0112] = p["orientation"]
                kw["exif"] = exif.tobytes()
            im.save(dst, "JPEG", **kw)
            w, h = im.size
            what += f"; JPEG q{p['quality']}" + (" progressive" if p["progressive"] else "")
            if im.mode == "RGB":
                what += " " + ["4:4:4", "4:2:2", "4:2:0"][p["subsampling"]]
        size = os.path.getsize(dst)
        total += size
        if total > a.max_mb * 1e6:
            shutil.rmtree(tmp)
            sys.exit(f"error: the set passes --max-mb {a.max_mb} at photo {k + 1} of {a.count}; ask for fewer photos or a larger limit")
        with open(dst, "rb") as fh:
            sha = hashlib.sha256(fh.read()).hexdigest()[:16]
        rows.append([rel, str(w), str(h), str(size), sha, o.pkg, o.version, "/" + o.rel, o.author, o.licence, what])
    with open(os.path.join(tmp, "SOURCES.tsv"), "w", encoding="utf-8") as fh:
        fh.write("file\twidth\theight\tbytes\tsha256_16\tpackage\tversion\toriginal\tauthor\tlicence\ttransform\n")
        for r in rows:
            fh.write("\t".join(r) + "\n")
    lic = os.path.join(tmp, "LICENSES")
    os.makedirs(lic)
    for pkg in sorted({o.pkg for o in originals}):
        shutil.copyfile(os.path.join(a.extract, pkg, "usr/share/doc", pkg, "copyright"), os.path.join(lic, f"{pkg}.copyright"))
    if os.path.isdir(a.out):
        os.rmdir(a.out)
    os.rename(tmp, a.out)
    mp = sum(int(r[1]) * int(r[2]) for r in rows) / 1e6
    print(f"{len(rows)} photos from {len(originals)} originals, {mp:.0f} MP, {total / 1e6:.1f} MB in {a.out}")


if __name__ == "__main__":
    main()
