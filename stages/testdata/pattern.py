"""Writes the project's synthetic test pattern: usage pattern.py ppm|rgba-png W H.

Red rises to the right, green rises downwards, blue is a 4-pixel checkerboard,
and the top-left 3x3 pixels are white, so that every flip and rotation of the
picture is distinguishable. rgba-png adds an alpha ramp from left to right.
"""
import struct
import sys
import zlib


def pixel(x, y, w, h):
    if x < 3 and y < 3:
        return 255, 255, 255
    r = x * 255 // max(1, w - 1)
    g = y * 255 // max(1, h - 1)
    b = 200 if (x // 4 + y // 4) % 2 else 30
    return r, g, b


def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def main():
    kind, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    out = sys.stdout.buffer
    if kind == "ppm":
        out.write(b"P6\n%d %d\n255\n" % (w, h))
        for y in range(h):
            for x in range(w):
                out.write(bytes(pixel(x, y, w, h)))
    elif kind == "rgba-png":
        raw = bytearray()
        for y in range(h):
            raw.append(0)
            for x in range(w):
                raw += bytes(pixel(x, y, w, h)) + bytes([64 + x * 191 // max(1, w - 1)])
        out.write(b"\x89PNG\r\n\x1a\n")
        out.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0)))
        out.write(chunk(b"IDAT", zlib.compress(bytes(raw))))
        out.write(chunk(b"IEND", b""))
    else:
        sys.exit("usage: pattern.py ppm|rgba-png W H")


main()
