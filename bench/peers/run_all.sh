#!/usr/bin/env bash
# run_all.sh: every peer on the GPU machine, on identical inputs, as JSON Lines.
#
#   bash bench/peers/run_all.sh [--out DIR] [--photos DIR] [--frames N] [--repeats R] [--quick]
#
# Writes DIR/peers.jsonl (one record per run; the schema of common.py) and DIR/peers.log (each
# script's stderr: checks, summaries, errors). DIR defaults to $OUT when set, else ./peers-out.
# Order: the --check of every peer against the numpy reference; the headline configuration of
# each peer (1920x1080 raw frames, seed 1); the stream and batch sweeps of the two tuned GPU peers;
# then, with --photos, the folder peers (nvJPEG and OpenCV) on the same photos.
# One peer failing does not stop the others; the exit status is 1 if any failed.
# --quick runs fewer frames and repeats and no sweeps (a smoke test).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-./peers-out} photos="" frames=1024 repeats=5 quick=0
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=${2:?}; shift 2 ;;
    --photos) photos=${2:?}; shift 2 ;;
    --frames) frames=${2:?}; shift 2 ;;
    --repeats) repeats=${2:?}; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "run_all.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ "$quick" = 1 ]; then frames=256 repeats=3; fi
[ -z "$photos" ] || [ -d "$photos" ] || { echo "run_all.sh: --photos $photos is not a folder" >&2; exit 2; }
mkdir -p "$out"
jsonl=$out/peers.jsonl log=$out/peers.log
: >"$jsonl"
: >"$log"
py=${PYTHON:-python3}
failed=0
common=(--size 1920x1080 --seed 1 --sigma 1.5 --warmup 1 --repeats "$repeats")

run() {  # run NAME SCRIPT ARGS...: one measurement, its JSON line appended to peers.jsonl
  local name=$1 script=$2; shift 2
  echo "== $name: $script $*" | tee -a "$log" >&2
  local t0=$SECONDS
  if "$py" "$here/$script" "$@" --json >>"$jsonl" 2>>"$log"; then
    echo "   ok ($((SECONDS - t0)) s): $(tail -n 1 "$log")" >&2
  else
    echo "   FAILED (status $?): see $log" >&2
    failed=$((failed + 1))
  fi
}

check() {  # check SCRIPT ARGS...: the peer against the numpy reference on small odd frames
  echo "== check: $1 ${*:2}" | tee -a "$log" >&2
  if "$py" "$here/$1" --check "${@:2}" 2>>"$log"; then
    echo "   $(tail -n 1 "$log")" >&2
  else
    echo "   CHECK FAILED: see $log" >&2
    failed=$((failed + 1))
  fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$log" >&2
"$py" -c 'import sys, numpy; print("python", sys.version.split()[0], "numpy", numpy.__version__)' 2>&1 | tee -a "$log" >&2

check torch_naive.py
check torch_tuned.py
check torch_tuned.py --compile
check cupy_rawkernel.py
check torchvision_nvjpeg.py --mode files --input "${photos:-.}"
check opencv_cpu.py

run naive torch_naive.py "${common[@]}" --frames "$frames" --batch 16
run tuned torch_tuned.py "${common[@]}" --frames "$frames" --batch 16 --streams 4
run tuned-compile torch_tuned.py "${common[@]}" --frames "$frames" --batch 16 --streams 4 --compile
run cupy cupy_rawkernel.py "${common[@]}" --frames "$frames" --batch 16 --streams 4
run opencv-raw opencv_cpu.py "${common[@]}" --frames "$frames"

if [ "$quick" = 0 ]; then
  for s in 1 2 8; do
    run "tuned s$s" torch_tuned.py "${common[@]}" --frames "$frames" --batch 16 --streams "$s"
    run "cupy s$s" cupy_rawkernel.py "${common[@]}" --frames "$frames" --batch 16 --streams "$s"
  done
  for b in 1 4 8 32 64; do
    run "tuned b$b" torch_tuned.py "${common[@]}" --frames "$frames" --batch "$b" --streams 4
    run "cupy b$b" cupy_rawkernel.py "${common[@]}" --frames "$frames" --batch "$b" --streams 4
  done
fi

if [ -n "$photos" ]; then
  tmp=$(mktemp -d)
  # decode workers: 2 was the best on an H200 with 16 cores (1: 186, 2: 235, 4: 211, 8: 171 img/s)
  for s in $([ "$quick" = 1 ] && echo 2 || echo 1 2 4); do
    run "nvjpeg-files s$s" torchvision_nvjpeg.py --mode files --input "$photos" --output "$tmp/nvjpeg" --batch 16 --streams "$s" --warmup 1 --repeats "$repeats"
  done
  run opencv-files opencv_cpu.py --mode files --input "$photos" --output "$tmp/opencv" --warmup 1 --repeats "$repeats"
  rm -rf "$tmp"
fi

echo "$(wc -l <"$jsonl") records in $jsonl; $failed failed" >&2
[ "$failed" -eq 0 ]
