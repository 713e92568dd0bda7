#!/usr/bin/env bash
# thumbnails.sh: imgpipe's thumbnail job against libvips's vipsthumbnail, each at its best, on
# folders of several sizes made from the JPEG photos under one folder; prints a Markdown table.
#
#   bash bench/thumbnails.sh PHOTOS_DIR [--files 600,1800,5400] [--rounds 2] [--quality 75]
#
# The job is 256-pixel thumbnails written as JPEG at one quality for both:
#   imgpipe   decode scale=auto | resize width=256 height=256 fit=inside filter=lanczos3 |
#             save format=jpeg quality=Q, with --device auto (the default: the GPU when the run
#             repays starting it), cuda and cpu
#   libvips   vipsthumbnail -s 256 -o DIR/%s.jpg[Q=Q], one process per core (xargs -P), one
#             thread each (VIPS_CONCURRENCY=1), files handed out 30 at a time and also in equal
#             shares of files/cores; the table takes the faster of the two in each round
# Both decode JPEGs at 1/2, 1/4 or 1/8 size when the thumbnail allows (libvips always does;
# imgpipe because of scale=auto). Every command is one process (or one xargs) timed end to end,
# outputs on tmpfs, in an order that turns at each folder of each round. A folder of N files
# repeats the photos (hard links) under new names.
# After the timings the GPU's thumbnails are compared byte for byte with the CPU's.
#
# Environment: IMGPIPE is the CLI (default .gpu/imgpipe, else imgpipe on PATH); VIPSTHUMBNAIL
# is the vipsthumbnail command (default vipsthumbnail; it may include arguments, e.g.
# "env LD_LIBRARY_PATH=/opt/vips/lib /opt/vips/bin/vipsthumbnail"). Without a GPU the GPU
# column says "failed", the rest still runs, and the exit status is 1, as it is when a
# thumbnail differs between the GPU and the CPU.
set -uo pipefail

usage() { sed -n '5,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
photos="" sizes=600,1800,5400 rounds=2 quality=75
while [ $# -gt 0 ]; do
  case $1 in
    --files) sizes=${2:?--files needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --quality) quality=${2:?--quality needs a value}; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "thumbnails.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$photos" ] || usage; photos=$1; shift ;;
  esac
done
[ -n "$photos" ] || usage
[ -d "$photos" ] || { echo "thumbnails.sh: $photos is not a folder" >&2; exit 2; }
[[ $sizes =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ && $rounds =~ ^[1-9][0-9]*$ && $quality =~ ^[0-9]+$ ]] &&
  [ "$quality" -ge 1 ] && [ "$quality" -le 100 ] ||
  { echo "thumbnails.sh: --files is a list of counts, --rounds a count, --quality 1 to 100" >&2; exit 2; }
imgpipe=${IMGPIPE:-.gpu/imgpipe}
[ -x "$imgpipe" ] || imgpipe=$(command -v imgpipe) ||
  { echo "thumbnails.sh: no imgpipe: set IMGPIPE or build .gpu/imgpipe" >&2; exit 2; }
read -ra vips <<<"${VIPSTHUMBNAIL:-vipsthumbnail}"
"${vips[@]}" --vips-version >/dev/null 2>&1 ||
  { echo "thumbnails.sh: '${vips[*]}' does not run: set VIPSTHUMBNAIL" >&2; exit 2; }
mapfile -t sources < <(find "$photos" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) | sort)
[ ${#sources[@]} -gt 0 ] || { echo "thumbnails.sh: no JPEG in $photos" >&2; exit 2; }
cores=$(nproc)
tmp=/dev/shm
[ -d "$tmp" ] && [ -w "$tmp" ] || tmp=${TMPDIR:-/tmp}
work=$(mktemp -d "$tmp/imgpipe-thumbs.XXXXXX")
trap 'rm -rf "$work"' EXIT

spec="decode scale=auto | resize width=256 height=256 fit=inside filter=lanczos3 | save format=jpeg quality=$quality"

. "$(dirname "$0")/timing.sh"  # folder, timed, ratio, joined

vips_run() {  # vips_run N PER_PROCESS
  find "$work/in$1" -type f | VIPS_CONCURRENCY=1 xargs -P "$cores" -n "$2" "${vips[@]}" -s 256 -o "$work/out/%s.jpg[Q=$quality]"
}
imgpipe_run() {  # imgpipe_run N DEVICE
  "$imgpipe" run -i "$work/in$1" -o "$work/out" -p "$spec" --device "$2" --progress none --quiet
}

# best A B: the smaller of two timings, ignoring a failed one.
best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "failed") print b; else if (b == "failed" || a + 0 <= b + 0) print a; else print b }'; }

IFS=, read -ra counts <<<"$sizes"
for n in "${counts[@]}"; do folder "$n"; done
# The four contenders run in an order that turns one place at each step (folder of a round), so
# none always runs right after another: in earlier tables `auto` always followed libvips.
modes=(libvips auto cuda cpu) step=0
declare -A vt at gt ct t  # t: this step's timings by mode
for ((r = 1; r <= rounds; r++)); do
  for n in "${counts[@]}"; do
    share=$(((n + cores - 1) / cores)) order=()
    for ((k = 0; k < ${#modes[@]}; k++)); do order+=("${modes[(step + k) % ${#modes[@]}]}"); done
    step=$((step + 1))
    t=()
    for m in "${order[@]}"; do
      if [ "$m" = libvips ]; then
        t[v30]=$(timed "$n" vips_run "$n" 30) t[vshare]=$(timed "$n" vips_run "$n" "$share")
      else
        t[$m]=$(timed "$n" imgpipe_run "$n" "$m")
      fi
    done
    vt[$n]+="$(best "${t[v30]}" "${t[vshare]}") " at[$n]+="${t[auto]} " gt[$n]+="${t[cuda]} " ct[$n]+="${t[cpu]} "
    echo "round $r, $n files ($(joined "${order[@]}")): libvips -n 30 ${t[v30]}, -n $share ${t[vshare]}; imgpipe auto ${t[auto]}, GPU ${t[cuda]}, CPU ${t[cpu]} (seconds)" >&2
  done
done

# The GPU's thumbnails against the CPU's, on the first folder.
first=${counts[0]}
check="not compared: a run failed"
if [ "$(timed "$first" imgpipe_run "$first" cuda)" != failed ] && mv "$work/out" "$work/gpu" &&
  [ "$(timed "$first" imgpipe_run "$first" cpu)" != failed ]; then
  differ=0
  for f in "$work"/out/*.jpg; do cmp -s "$f" "$work/gpu/${f##*/}" || differ=$((differ + 1)); done
  check="$differ of $first differ"
  [ "$differ" = 0 ] || echo "thumbnails.sh: $differ GPU thumbnails differ from the CPU's" >>"$work/errors"
fi

echo "thumbnails.sh $(date -u +%FT%TZ): $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || echo 'no GPU'), $cores cores"
echo "$("${vips[@]}" --vips-version 2>/dev/null | head -n 1); $("$imgpipe" version 2>/dev/null | head -n 1)"
echo
echo "| files | libvips, s | imgpipe auto, s | vs libvips | imgpipe GPU, s | vs libvips | imgpipe CPU, s | vs libvips |"
echo "|---|---|---|---|---|---|---|---|"
for n in "${counts[@]}"; do
  read -ra v <<<"${vt[$n]}"; read -ra a <<<"${at[$n]}"; read -ra g <<<"${gt[$n]}"; read -ra c <<<"${ct[$n]}"
  ar=() gr=() cr=()
  for ((i = 0; i < rounds; i++)); do
    ar+=("$(ratio "${v[i]}" "${a[i]}")"); gr+=("$(ratio "${v[i]}" "${g[i]}")"); cr+=("$(ratio "${v[i]}" "${c[i]}")")
  done
  echo "| $n | $(joined "${v[@]}") | $(joined "${a[@]}") | $(joined "${ar[@]}") | $(joined "${g[@]}") | $(joined "${gr[@]}") | $(joined "${c[@]}") | $(joined "${cr[@]}") |"
done
echo
echo "Each ratio is libvips's time over imgpipe's in the same round. GPU against CPU thumbnails, $first files: $check."
if [ -s "$work/errors" ]; then
  echo; echo "Failed runs (the first 12 lines):"; head -n 12 "$work/errors"
  exit 1
fi
