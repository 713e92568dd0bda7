#!/usr/bin/env bash
# vipsbundle.sh: a vipsthumbnail that runs on a machine without libvips (the GPU machine),
# made from Debian's packages: the binary, every shared library it loads (glibc and its loader
# included, so that the other machine's own C library does not matter) and their copyright
# files, in one folder with a wrapper.
#
#   bash bench/peers/vipsbundle.sh [OUT_DIR]      (default .vipsbundle; also writes OUT_DIR.tar.xz)
#   OUT_DIR/run-vips.sh --vips-version
#   VIPSTHUMBNAIL=OUT_DIR/run-vips.sh bash bench/thumbnails.sh PHOTOS
#
# Needs, on a Debian 12 machine that can download: `apt-get install -y libvips-tools` first
# (the library closure is read with ldd from the installed binary); the packages themselves
# are fetched with `apt-get download` and unpacked with `dpkg -x`, so that the bundle holds
# Debian's files as shipped. Prints the bundle's size, and its size compressed with xz.
set -euo pipefail

out=${1:-.vipsbundle}
bin=$(command -v vipsthumbnail) || { echo "vipsbundle.sh: no vipsthumbnail: apt-get install -y libvips-tools" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The files the binary loads (the loader too), each as "SONAME REAL_PATH", and their packages.
mapfile -t libs < <(ldd "$bin" | awk '$3 ~ /^\// { print $1, $3 } $1 ~ /^\// { n = split($1, p, "/"); print p[n], $1 }' |
  while read -r so path; do echo "$so $(readlink -f "$path")"; done | sort -u)
pkgs=()
for f in "$bin" "${libs[@]#* }"; do
  p=$(dpkg -S "$f" 2>/dev/null || dpkg -S "${f#/usr}" 2>/dev/null) ||
    { echo "vipsbundle.sh: no package owns $f" >&2; exit 1; }
  pkgs+=("${p%%:*}")
done
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
(cd "$stage" && apt-get download -qq "${pkgs[@]}")
mkdir -p "$stage/root"
for d in "$stage"/*.deb; do dpkg -x "$d" "$stage/root"; done

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/share/doc"
cp "$stage/root/usr/bin/vipsthumbnail" "$out/bin/"
for l in "${libs[@]}"; do
  so=${l%% *} f=${l#* }
  src=$stage/root$f
  [ -e "$src" ] || src=$stage/root${f#/usr}
  [ -e "$src" ] || { echo "vipsbundle.sh: $f is in none of the packages" >&2; exit 1; }
  cp "$src" "$out/lib/$so"
done
for p in "${pkgs[@]}"; do
  [ -f "$stage/root/usr/share/doc/$p/copyright" ] && cp "$stage/root/usr/share/doc/$p/copyright" "$out/share/doc/$p.copyright"
done
printf '%s\n' "${pkgs[@]}" | while read -r p; do dpkg-query -W -f='${Package} ${Version}\n' "$p"; done >"$out/PACKAGES"

cat >"$out/run-vips.sh" <<'EOF'
#!/bin/sh
# Runs the bundled vipsthumbnail with the bundled libraries and C library, through the
# bundled loader, whatever the machine's own libraries are.
here=$(cd "$(dirname "$0")" && pwd)
VIPSHOME=$here exec "$here/lib/ld-linux-x86-64.so.2" --library-path "$here/lib" "$here/bin/vipsthumbnail" "$@"
EOF
chmod +x "$out/run-vips.sh"
env -i PATH=/usr/bin:/bin "$out/run-vips.sh" --vips-version
# The device tool carries 64 MiB a call: the bundle goes as a tarball, unpacked there with
#   mkdir -p .vipsbundle && tar -xJf .vipsbundle.tar.xz -C .vipsbundle
tar -C "$out" -cf - . | xz -T0 -6 >"${out%/}.tar.xz"
echo "vipsbundle.sh: $out holds $(du -sh "$out" | cut -f1) from ${#pkgs[@]} packages; ${out%/}.tar.xz: $(wc -c <"${out%/}.tar.xz" | awk '{ printf "%.1f MB", $1 / 1e6 }')"
