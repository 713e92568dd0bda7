#!/bin/sh
# Regenerates the restart-interval fixtures of jpegdec's tests (Go's image/jpeg encoder
# writes no DRI, so these come from libjpeg-turbo's cjpeg). The picture is the project's
# synthetic pattern (stages/testdata/pattern.py), so the files carry the project's licence.
# Needs python3 and cjpeg from libjpeg-turbo 2.1.5 (Debian 12: libjpeg-turbo-progs), with
# which the output is byte-identical. Run it from this folder: sh make.sh
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pattern=../../../stages/testdata/pattern.py

# name        size   cjpeg options
while read -r name w h opts; do
	python3 "$pattern" ppm "$w" "$h" > "$tmp/p.ppm"
	# shellcheck disable=SC2086 # opts is a list of options
	cjpeg -quality 90 $opts "$tmp/p.ppm" > "$name.jpg"
done <<'LIST'
rst420     96 64  -sample 2x2 -restart 1B
rst422     50 30  -sample 2x1 -restart 1
rst411     70 20  -sample 4x1 -restart 4B
rst440     30 50  -sample 1x2 -restart 3B
rst444     16 16  -sample 1x1 -restart 10B
rst_gray   37 21  -grayscale -restart 2B
LIST
