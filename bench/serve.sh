#!/usr/bin/env bash
# serve.sh: the thumbnail job sent to a warm `imgpipe serve` (`imgpipe run --server`) against
# a fresh `imgpipe run` and libvips's vipsthumbnail with a process per core, on folders of
# several sizes made from the JPEG photos under one folder; prints a Markdown table.
#
#   bash bench/serve.sh PHOTOS_DIR [--files 600,1800] [--rounds 2] [--device cuda] [--spec SPEC] [--port 18090]
#
# The job is the issue's: SPEC (default decode | resize width=256 height=256 fit=inside |
# save format=jpeg quality=75) for imgpipe, vipsthumbnail -s 256 -o DIR/%s.jpg[Q=75] for
# libvips (one process per core, one thread each, files handed out 30 at a time, as
# thumbnails.sh does). `imgpipe serve --device D --allow-root WORK` starts once, before any
# timing, and takes one untimed job of the first folder; then each round times, per folder:
#   warm      imgpipe run --server URL -i IN -o OUT -p SPEC (the job runs in the server)
#   fresh     imgpipe run -i IN -o OUT -p SPEC --device D (a new process: it opens the device)
#   libvips   xargs -P CORES vipsthumbnail ...
# in an order that turns at each folder, outputs on tmpfs. The issue's target: warm ≥ 10×
# faster than libvips for 600 photos on the GPU machine.
#
# Environment: IMGPIPE is the CLI (default .gpu/imgpipe, else imgpipe on PATH); VIPSTHUMBNAIL
# is the vipsthumbnail command (default vipsthumbnail; on the GPU machine the bundle of
# bench/peers/vipsbundle.sh: VIPSTHUMBNAIL=.vipsbundle/run-vips.sh). A failed run is
# "failed" in the table, and the exit status is then 1.
set -uo pipefail

usage() { sed -n '6,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
photos="" sizes=600,1800 rounds=2 device=cuda port=18090
spec="decode | resize width=256 height=256 fit=inside | save format=jpeg quality=75"
while [ $# -gt 0 ]; do
  case $1 in
    --files) sizes=${2:?--files needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --device) device=${2:?--device needs a value}; shift 2 ;;
    --spec) spec=${2:?--spec needs a chain}; shift 2 ;;
    --port) port=${2:?--port needs a number}; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "serve.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$photos" ] || usage; photos=$1; shift ;;
  esac
done
[ -n "$photos" ] || usage
[ -d "$photos" ] || { echo "serve.sh: $photos is not a folder" >&2; exit 2; }
[[ $sizes =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ && $rounds =~ ^[1-9][0-9]*$ && $port =~ ^[1-9][0-9]*$ ]] ||
  { echo "serve.sh: --files is a list of counts, --rounds a count, --port a number" >&2; exit 2; }
imgpipe=${IMGPIPE:-.gpu/imgpipe}
[ -x "$imgpipe" ] || imgpipe=$(command -v imgpipe) ||
  { echo "serve.sh: no imgpipe: set IMGPIPE or build .gpu/imgpipe" >&2; exit 2; }
read -ra vips <<<"${VIPSTHUMBNAIL:-vipsthumbnail}"
"${vips[@]}" --vips-version >/dev/null 2>&1 ||
  { echo "serve.sh: '${vips[*]}' does not run: set VIPSTHUMBNAIL" >&2; exit 2; }
mapfile -t sources < <(find "$photos" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) | sort)
[ ${#sources[@]} -gt 0 ] || { echo "serve.sh: no JPEG in $photos" >&2; exit 2; }
cores=$(nproc)
tmp=/dev/shm
[ -d "$tmp" ] && [ -w "$tmp" ] || tmp=${TMPDIR:-/tmp}
work=$(mktemp -d "$tmp/imgpipe-serve.XXXXXX")
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server"; rm -rf "$work"' EXIT
url=http://127.0.0.1:$port

. "$(dirname "$0")/timing.sh"  # folder, timed, ratio, joined
warm_run() { "$imgpipe" run --server "$url" -i "$work/in$1" -o "$work/out" -p "$spec" --progress none --quiet; }
fresh_run() { "$imgpipe" run -i "$work/in$1" -o "$work/out" -p "$spec" --device "$device" --progress none --quiet; }
libvips_run() {
  find "$work/in$1" -type f | VIPS_CONCURRENCY=1 xargs -P "$cores" -n 30 "${vips[@]}" -s 256 -o "$work/out/%s.jpg[Q=75]"
}

IFS=, read -ra counts <<<"$sizes"
for n in "${counts[@]}"; do folder "$n"; done
"$imgpipe" serve --listen "127.0.0.1:$port" --device "$device" --allow-root "$work" >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 1200); do
  curl -fsS -o /dev/null "$url/readyz" 2>/dev/null && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
curl -fsS -o /dev/null "$url/readyz" 2>/dev/null ||
  { echo "serve.sh: imgpipe serve did not get ready:" >&2; tail -n 5 "$work/serve.log" >&2; exit 1; }
first=${counts[0]}
echo "untimed warm-up job of $first files: $(timed "$first" warm_run "$first") s" >&2

modes=(warm fresh libvips) step=0
declare -A res t
for ((r = 1; r <= rounds; r++)); do
  for n in "${counts[@]}"; do
    order=()
    for ((k = 0; k < ${#modes[@]}; k++)); do order+=("${modes[(step + k) % ${#modes[@]}]}"); done
    step=$((step + 1))
    for m in "${order[@]}"; do
      t[$m]=$(timed "$n" "${m}_run" "$n")
      res[$m,$n]+="${t[$m]} "
    done
    echo "round $r, $n files ($(joined "${order[@]}")): warm ${t[warm]}, fresh ${t[fresh]}, libvips ${t[libvips]} (seconds)" >&2
  done
done

echo "serve.sh $(date -u +%FT%TZ): $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || echo 'no GPU'), $cores cores, --device $device"
echo "$("${vips[@]}" --vips-version 2>/dev/null | head -n 1); $("$imgpipe" version 2>/dev/null | head -n 1); chain: $spec"
echo
echo "| files | libvips, s | warm serve (run --server), s | vs libvips | fresh imgpipe run, s | vs libvips |"
echo "|---|---|---|---|---|---|"
for n in "${counts[@]}"; do
  read -ra v <<<"${res[libvips,$n]}"; read -ra w <<<"${res[warm,$n]}"; read -ra f <<<"${res[fresh,$n]}"
  wr=() fr=()
  for ((i = 0; i < rounds; i++)); do wr+=("$(ratio "${v[i]}" "${w[i]}")"); fr+=("$(ratio "${v[i]}" "${f[i]}")"); done
  echo "| $n | $(joined "${v[@]}") | $(joined "${w[@]}") | $(joined "${wr[@]}") | $(joined "${f[@]}") | $(joined "${fr[@]}") |"
done
echo
echo "Each ratio is libvips's time over imgpipe's in the same round; one server served every warm run."
if [ -s "$work/errors" ]; then
  echo; echo "Failed runs (the first 12 lines):"; head -n 12 "$work/errors"
  exit 1
fi
