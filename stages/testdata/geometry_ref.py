"""Outside references for the geometry stages' tests (stages/geometry_ref_test.go).

usage: geometry_ref.py MANIFEST
Each line of MANIFEST is one job, OP IN OUT W H C ARGS... separated by spaces
(one interpreter start for all, since importing cv2 takes a while). IN holds W*H*C raw bytes (rows packed, channels interleaved); OUT receives the
reference's raw bytes. OP is one of
  cv_area OW OH      cv2.resize(..., INTER_AREA)
  cv_linear OW OH    cv2.resize(..., INTER_LINEAR)
  pil_lanczos OW OH  PIL.Image.resize(..., LANCZOS)
  np_flip AXIS       numpy: h = fliplr, v = flipud
  np_rotate ANGLE    numpy: clockwise, np.rot90(a, -ANGLE/90)
  np_crop X Y CW CH  numpy slicing
Exit status 3 with a message when a module is missing, so the test can skip.
"""
import sys

try:
    import numpy as np
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"missing module: {e.name}", file=sys.stderr)
    sys.exit(3)


def main():
    with open(sys.argv[1]) as f:
        for line in f:
            if line.strip():
                run(*line.split())


def run(op, src, dst, w, h, c, *args):
    w, h, c = int(w), int(h), int(c)
    a = np.fromfile(src, dtype=np.uint8).reshape(h, w, c)
    if op in ("cv_area", "cv_linear"):
        try:
            import cv2
        except ImportError:
            print("missing module: cv2", file=sys.stderr)
            sys.exit(3)
        flag = cv2.INTER_AREA if op == "cv_area" else cv2.INTER_LINEAR
        out = cv2.resize(a[:, :, 0] if c == 1 else a, (int(args[0]), int(args[1])), interpolation=flag)
    elif op == "pil_lanczos":
        try:
            from PIL import Image
        except ImportError:
            print("missing module: PIL", file=sys.stderr)
            sys.exit(3)
        im = Image.fromarray(a[:, :, 0] if c == 1 else a)
        out = np.asarray(im.resize((int(args[0]), int(args[1])), Image.LANCZOS))
    elif op == "np_flip":
        out = np.fliplr(a) if args[0] == "h" else np.flipud(a)
    elif op == "np_rotate":
        out = np.rot90(a, -int(args[0]) // 90)
    elif op == "np_crop":
        x, y, cw, ch = map(int, args)
        out = a[y:y + ch, x:x + cw]
    else:
        print(f"unknown op {op}", file=sys.stderr)
        sys.exit(2)
    np.ascontiguousarray(out, dtype=np.uint8).tofile(dst)


if __name__ == "__main__":
    main()
