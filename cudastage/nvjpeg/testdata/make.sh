#!/bin/sh
# Regenerates the nvJPEG fixtures that neither Go's encoder nor stages/testdata provide:
# restart intervals, and baseline 4:4:4 / 4:2:2 at a size where the hardware engines work on
# several MCU rows. The picture is stages/testdata's synthetic pattern (pattern.py), so the files
# carry the project's licence. Needs python3 and libjpeg-turbo's cjpeg (Debian 12:
# libjpeg-turbo-progs 2.1.5). Run it from this folder: sh make.sh
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 ../../../stages/testdata/pattern.py ppm 161 97 > "$tmp/p.ppm"
cjpeg -quality 90 -sample 2x2 -restart 1 "$tmp/p.ppm" > restart_rows.jpg    # a restart marker every MCU row
cjpeg -quality 90 -sample 2x2 -restart 3B "$tmp/p.ppm" > restart_blocks.jpg # every 3 MCUs
cjpeg -quality 90 -sample 1x1 "$tmp/p.ppm" > base444.jpg
cjpeg -quality 90 -sample 2x1 "$tmp/p.ppm" > base422.jpg
