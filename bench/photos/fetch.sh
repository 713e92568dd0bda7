#!/usr/bin/env bash
# fetch.sh: real photographs for the folder benchmarks, from Debian packages.
#
#   bench/photos/fetch.sh OUT_DIR [--count N] [--max-mb MB] [--cache DIR] [--seed S]
#
# Downloads four Debian packages that ship photographs as JPEG (with `apt-get download`, no
# install), extracts them with dpkg-deb into a cache, and writes N JPEG photos (default 200,
# 1-12 MP, under 60 MB) into OUT_DIR, plus OUT_DIR/SOURCES.tsv (package, original file, author,
# licence and the transform of every photo) and OUT_DIR/LICENSES/ (the packages' copyright files).
# The same packages and options give the same files byte for byte.
#
# Packages (Debian 12 bookworm versions at the time of writing):
#   lomiri-wallpapers-16.04, lomiri-wallpapers-20.04  CC-BY-4.0, CC-BY-SA-3.0/4.0, CC0-1.0 (per photo)
#   mate-backgrounds                                   GPL-2+
#   plasma-workspace-wallpapers                        GPL-2+ (Debian), LGPLv3 (upstream metadata)
# Only the photographs are used; renders and illustrations in the same packages are left out.
#
# Needs: apt-get (after `apt-get update`), dpkg-deb, python3 with Pillow (Debian: python3-pil).
# The GPU machine cannot download: run this on a machine that can, and carry OUT_DIR there.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
usage() { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

out="" count=200 maxmb=60 seed=2026
cache=${XDG_CACHE_HOME:-$HOME/.cache}/imgpipe-photos
while [ $# -gt 0 ]; do
  case $1 in
    --count) count=${2:?--count needs a value}; shift 2 ;;
    --max-mb) maxmb=${2:?--max-mb needs a value}; shift 2 ;;
    --cache) cache=${2:?--cache needs a value}; shift 2 ;;
    --seed) seed=${2:?--seed needs a value}; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "fetch.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || { echo "fetch.sh: one OUT_DIR only" >&2; usage; }; out=$1; shift ;;
  esac
done
[ -n "$out" ] || usage
case $count in ''|*[!0-9]*) echo "fetch.sh: --count must be a positive integer" >&2; exit 2 ;; esac
[ "$count" -ge 1 ] || { echo "fetch.sh: --count must be at least 1" >&2; exit 2; }

# Debian's python3 carries python3-pil; a python3 earlier on PATH (pyenv, venv) may not.
py=""
for c in python3 /usr/bin/python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import PIL' 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { echo "fetch.sh: needs python3 with Pillow (Debian: apt-get install -y python3-pil)" >&2; exit 1; }
for t in apt-get dpkg-deb; do
  command -v "$t" >/dev/null || { echo "fetch.sh: needs $t (a Debian or Ubuntu system)" >&2; exit 1; }
done

pkgs=(lomiri-wallpapers-16.04 lomiri-wallpapers-20.04 mate-backgrounds plasma-workspace-wallpapers)
mkdir -p "$cache/debs" "$cache/extract"
versions="{"
for p in "${pkgs[@]}"; do
  deb=$(ls "$cache/debs/${p}_"*.deb 2>/dev/null | head -n 1 || true)
  if [ -z "$deb" ]; then
    echo "downloading $p" >&2
    if ! (cd "$cache/debs" && apt-get download "$p" >&2); then
      echo "fetch.sh: apt-get download $p failed; run 'apt-get update' first (Debian 12 or later has it)" >&2
      exit 1
    fi
    deb=$(ls "$cache/debs/${p}_"*.deb | head -n 1)
  fi
  ver=$(dpkg-deb -f "$deb" Version)
  if [ ! -f "$cache/extract/$p/.done-$ver" ]; then
    rm -rf "$cache/extract/$p"
    dpkg-deb -x "$deb" "$cache/extract/$p"
    touch "$cache/extract/$p/.done-$ver"
  fi
  versions+="\"$p\": \"$ver\","
done
versions="${versions%,}}"

"$py" "$here/make_photos.py" --extract "$cache/extract" --versions "$versions" \
  --out "$out" --count "$count" --max-mb "$maxmb" --seed "$seed"
