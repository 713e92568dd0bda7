#!/usr/bin/env bash
# run-gpu.sh: the whole benchmark on the GPU machine in one command: imgpipe and every peer on
# identical inputs, then the results table and plots.
#
#   bash bench/run-gpu.sh [PHOTOS_DIR] [--quick] [--date YYYY-MM-DD]
#
# Run it from the repository root on the GPU machine, after building the CLI here with
# ../shared/tools/gpu-bundle (it writes .gpu/imgpipe) and carrying .gpu (and, in a call of
# their own, the photos, e.g. out/bench-photos from bench/photos/fetch.sh) with the device tool.
# The GPU machine has python3 with torch, torchvision, cupy, opencv and matplotlib; nothing is
# downloaded.
#
# Steps, with their time on an H200 (estimates; the script logs the real ones in timings.txt):
#   1. the peers' frames: 64 random 1920x1080 RGB frames, seed 1 (common.py --out)      ~5 s
#   2. imgpipe bench raw, headline: those frames, 2 streams, batch 16, 1024 frames,
#      median of 5, with --trace and the CPU run for the GPU/CPU ratio                  ~10 s
#   3. imgpipe bench raw, sweep: streams 1,2,4,8 x batch 4,8,16,32, median of 3           ~60 s
#   4. imgpipe bench raw, pageable memory, 1 stream, batch 16 (the textbook flow)        ~15 s
#   5. imgpipe bench copy: page-locked and pageable bandwidth, one-batch profile         ~5 s
#   6. imgpipe bench files PHOTOS_DIR, --device cuda and --device cpu, median of 3       ~40 s
#   7. bench/peers/run_all.sh (checks, headlines, sweeps, folder peers)                  ~4 min
#   8. bench/plot/plot.py: <device>-<date>.md and PNGs into bench/results/               ~15 s
# In all about 6 minutes; --quick (fewer frames and repeats, no sweeps) about 1.5 minutes.
#
# Output: bench/results/<device>-<date>.md (the table, with the copy profile and the step
# times appended) and <device>-<date>-{throughput,streams,batch,timeline}.png, plus
# bench/results/raw-<date>/ (imgpipe.jsonl, peers.jsonl, copy.txt/.json, trace.json, logs).
# When $OUT is set, all of it is also packed into $OUT/bench-results.tar.gz (one file, since
# the device tool brings back at most 8): unpack it at the repository root and commit.
# A failing step does not stop the others; the exit status is then 1.
set -uo pipefail

usage() { sed -n '4,4p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
photos="" quick=0 date=$(date +%F)
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1; shift ;;
    --date) date=${2:?--date needs a value}; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run-gpu.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$photos" ] || usage; photos=$1; shift ;;
  esac
done
[ -f bench/peers/common.py ] || { echo "run-gpu.sh: run it from the repository root" >&2; exit 2; }
imgpipe=${IMGPIPE:-.gpu/imgpipe}
[ -x "$imgpipe" ] || { echo "run-gpu.sh: no $imgpipe: build it with ../shared/tools/gpu-bundle and carry .gpu" >&2; exit 2; }
[ -z "$photos" ] || [ -d "$photos" ] || { echo "run-gpu.sh: photos folder $photos is not a folder" >&2; exit 2; }
py=${PYTHON:-python3}

results=bench/results
raw=$results/raw-$date
mkdir -p "$raw"
work=$(mktemp -d "${TMPDIR:-/tmp}/imgpipe-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
timings=$raw/timings.txt log=$raw/run-gpu.log
: >"$timings"
: >"$raw/imgpipe.jsonl"
failed=0

frames=1024 repeats=5 sweep_repeats=3 files_repeats=3
if [ "$quick" = 1 ]; then frames=256 repeats=3 sweep_repeats=2 files_repeats=1; fi
common=(--size 1920x1080 --sigma 1.5 --frames "$frames" --warmup 1)

step() {  # step NAME CMD...: runs one step, logs its output and time, keeps going on failure
  local name=$1; shift
  echo "== $name: $*" | tee -a "$log" >&2
  local t0=$SECONDS rc=0
  "$@" 2>>"$log" || rc=$?
  local dt=$((SECONDS - t0))
  if [ "$rc" = 0 ]; then
    echo "   ok, ${dt} s" >&2
    printf '%-34s %5d s\n' "$name" "$dt" >>"$timings"
  else
    echo "   FAILED (status $rc, ${dt} s): see $log" >&2
    printf '%-34s %5d s  FAILED (status %d)\n' "$name" "$dt" "$rc" >>"$timings"
    failed=$((failed + 1))
  fi
}

{
  echo "run-gpu.sh $(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null || echo 'no git')"
  "$imgpipe" version
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
  nproc
} >>"$log" 2>&1
device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
device=${device:-GPU}

# 1. The frames every system times: common.py's generator, written once for imgpipe.
step "frames" "$py" bench/peers/common.py --size 1920x1080 --pool 64 --seed 1 --out "$work/frames.rgb"

# 2-4. imgpipe on raw frames. The table goes to the log, one JSON record per line to imgpipe.jsonl.
raw_bench() { "$imgpipe" bench raw --device cuda --frames-file "$work/frames.rgb" "${common[@]}" --json "$@" >>"$raw/imgpipe.jsonl"; }
step "imgpipe raw headline" raw_bench --streams 2 --batch 16 --repeats "$repeats" --trace "$raw/trace.json"
if [ "$quick" = 0 ]; then
  step "imgpipe raw sweep" raw_bench --streams 1,2,4,8 --batch 4,8,16,32 --repeats "$sweep_repeats" --no-cpu
fi
step "imgpipe raw pageable" raw_bench --streams 1 --batch 16 --pageable --repeats "$sweep_repeats" --no-cpu

# 5. Copy bandwidth and the one-batch profile: the table (stderr) for the results page, the JSON
#    record beside it.
copy_bench() {
  "$imgpipe" bench copy --device cuda --size 1920x1080 --batch 16 --repeats "$repeats" --json >"$raw/copy.json" 2>"$raw/copy.txt" ||
    { cat "$raw/copy.txt" >&2; return 1; }
}
step "imgpipe copy" copy_bench

# 6. A folder end to end, on the GPU and on the CPU (every core).
files_bench() { "$imgpipe" bench files "$photos" --device "$1" --warmup 1 --repeats "$files_repeats" --json >>"$raw/imgpipe.jsonl"; }
if [ -n "$photos" ]; then
  step "imgpipe files cuda" files_bench cuda
  step "imgpipe files cpu" files_bench cpu
else
  echo "== no photos folder given: folder benchmarks skipped" | tee -a "$log" >&2
fi

# 7. The peers, on the same frames (same generator and seed) and the same photos.
peer_args=(--out "$raw" --frames "$frames" --repeats "$repeats")
[ -z "$photos" ] || peer_args+=(--photos "$photos")
[ "$quick" = 0 ] || peer_args+=(--quick)
step "peers (run_all.sh)" bash bench/peers/run_all.sh "${peer_args[@]}"

# 8. The table and the plots.
trace_arg=()
[ -s "$raw/trace.json" ] && trace_arg=(--trace "$raw/trace.json")
step "plot" "$py" bench/plot/plot.py "$raw/imgpipe.jsonl" "$raw/peers.jsonl" "${trace_arg[@]}" --out "$results" --date "$date" --device "$device"
md=$(ls -t "$results"/*-"$date".md 2>/dev/null | head -n 1)
if [ -n "$md" ]; then
  {
    echo
    echo "## Copy bandwidth and one-batch profile (\`imgpipe bench copy\`)"
    echo
    echo '```'
    cat "$raw/copy.txt" 2>/dev/null || echo "(bench copy failed: see raw-$date/run-gpu.log)"
    echo '```'
    echo
    echo "## How this page was made"
    echo
    echo "\`bash bench/run-gpu.sh PHOTOS_DIR\` on the GPU machine; records, trace and logs in \`raw-$date/\`. Step times:"
    echo
    echo '```'
    cat "$timings"
    echo '```'
  } >>"$md"
fi

echo "$failed steps failed; results in $results (raw records in $raw)" | tee -a "$log" >&2
if [ -n "${OUT:-}" ]; then
  tar -czf "$OUT/bench-results.tar.gz" "$results"
  echo "packed into $OUT/bench-results.tar.gz: unpack it at the repository root" >&2
fi
[ "$failed" -eq 0 ]
