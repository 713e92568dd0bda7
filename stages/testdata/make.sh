#!/bin/sh
# Regenerates the decode fixtures that Go's standard encoders cannot make.
# Every picture is the project's own synthetic pattern (see pattern.py), so
# the files carry the project's licence. Needs python3, libjpeg-turbo-progs
# (cjpeg), imagemagick (convert), webp (cwebp) and exiftool:
#   apt-get install -y imagemagick webp libjpeg-turbo-progs libimage-exiftool-perl
# Run it from this folder: sh make.sh
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 pattern.py ppm 24 16 > "$tmp/p24x16.ppm"
python3 pattern.py ppm 33 21 > "$tmp/p33x21.ppm"
python3 pattern.py ppm 23 13 > "$tmp/p23x13.ppm"
python3 pattern.py rgba-png 32 24 > "$tmp/p32x24a.png"

# JPEG: progressive (colour and gray), CMYK, and every chroma subsampling
# Go's decoder knows, on odd sizes so partial chroma blocks are exercised.
cjpeg -quality 90 -progressive "$tmp/p33x21.ppm" > progressive.jpg
cjpeg -quality 90 -progressive -grayscale "$tmp/p33x21.ppm" > progressive_gray.jpg
convert "$tmp/p33x21.ppm" -colorspace CMYK -quality 90 cmyk.jpg
for s in 1x1:444 2x1:422 1x2:440 2x2:420 4x1:411 4x2:410; do
	cjpeg -quality 90 -sample "${s%:*}" "$tmp/p23x13.ppm" > "sub${s#*:}.jpg"
done

# Progressive JPEGs whose AC scans a decode at 1/8 may leave out (stages/jpegtrim.go): every
# chroma subsampling that changes which components' blocks become one pixel, cjpeg's default
# scan script and others, restart markers, and a size that libjpeg-turbo decodes at 1/4 when
# asked for 1/8.
python3 pattern.py ppm 67 45 > "$tmp/p67x45.ppm"
python3 pattern.py ppm 2 3 > "$tmp/p2x3.ppm"
mkdir -p progressive
for s in 2x2:420 2x1:422 1x1:444; do
	cjpeg -quality 90 -progressive -sample "${s%:*}" "$tmp/p67x45.ppm" > "progressive/p${s#*:}.jpg"
done
cjpeg -quality 90 -progressive -grayscale "$tmp/p67x45.ppm" > progressive/gray.jpg
cjpeg -quality 90 -progressive -restart 1 "$tmp/p67x45.ppm" > progressive/restart.jpg
cjpeg -quality 90 -progressive "$tmp/p2x3.ppm" > progressive/tiny.jpg
printf '0,1,2: 0 0 0 0; 0: 1 63 0 0; 1: 1 63 0 0; 2: 1 63 0 0;\n' > "$tmp/spectral.txt"
cjpeg -quality 90 -sample 1x1 -scans "$tmp/spectral.txt" "$tmp/p67x45.ppm" > progressive/spectral.jpg
printf '0,1,2: 0 0 0 1; 0: 10 63 0 2; 0: 1 9 0 2; 1: 1 63 0 0; 2: 1 63 0 0; 0,1,2: 0 0 1 0; 0: 1 63 2 1; 0: 1 63 1 0;\n' > "$tmp/late.txt"
cjpeg -quality 90 -sample 1x1 -scans "$tmp/late.txt" "$tmp/p67x45.ppm" > progressive/late.jpg

# Arithmetic-coded JPEGs (sequential and progressive), which libjpeg-turbo reads and Go's
# decoder does not: jpegtran keeps sub420.jpg's coefficients, so they decode to its pixels.
# They live in arith/, out of the fixtures every decoder is tested on.
mkdir -p arith
jpegtran -arithmetic sub420.jpg > arith/arith420.jpg
jpegtran -arithmetic -progressive sub420.jpg > arith/arith_progressive.jpg

# JPEG with EXIF orientation 1..8 (big-endian "MM" EXIF, exiftool's default),
# and two with little-endian "II" EXIF.
cjpeg -quality 90 "$tmp/p24x16.ppm" > "$tmp/base.jpg"
rm -f orient_*.jpg # exiftool -o refuses to overwrite
for o in 1 2 3 4 5 6 7 8; do
	exiftool -q -n -Orientation=$o -o "orient_$o.jpg" "$tmp/base.jpg"
done
for o in 3 6; do
	exiftool -q -n -ExifByteOrder=II -Orientation=$o -o "orient_${o}_le.jpg" "$tmp/base.jpg"
done

# TIFF with LZW compression and a predictor, which Go can read but not write.
convert "$tmp/p33x21.ppm" -compress LZW -define tiff:predictor=2 lzw.tif

# WebP: lossy (YCbCr 4:2:0), lossy with alpha (NYCbCrA) and lossless (NRGBA).
cwebp -quiet -q 90 "$tmp/p32x24a.png" -noalpha -o lossy.webp
cwebp -quiet -q 90 "$tmp/p32x24a.png" -o lossy_alpha.webp
cwebp -quiet -lossless "$tmp/p32x24a.png" -o lossless.webp
