#!/usr/bin/env bash
# imgproxy.sh: the issue's CPU serving targets: `imgpipe serve` against imgproxy (Go + libvips,
# built here against Debian's libvips-dev) on the same photos, thumbnail request and
# concurrency, and against `imgpipe run` over the same files; prints a Markdown table.
#
#   bash bench/peers/imgproxy.sh PHOTOS_DIR [--src DIR] [--clients 8] [--duration 20s] [--imgproxy-workers 2,4] [--files 600]
#
# The request, for both servers: a JPEG thumbnail that fits inside 256×256, never enlarged,
# quality 75:
#   imgpipe   POST /v1/process?p=decode | resize width=256 height=256 fit=inside | save format=jpeg quality=75
#             (--spec SPEC for another chain, e.g. with "decode scale=auto")
#   imgproxy  GET /insecure/rs:fit:256:256:0/q:75/plain/local:///NAME@jpg, the photos under
#             IMGPROXY_LOCAL_FILESYSTEM_ROOT (imgproxy reads them itself; imgpipe's are sent)
# Each server is loaded by `imgpipe bench serve` (keep-alive clients, after a warm-up) for
# --duration with --clients clients. imgproxy runs once per value of --imgproxy-workers
# (IMGPROXY_WORKERS, the images it processes at once, each with one libvips thread; its
# default is 2 per core) and the table keeps its best. `imgpipe run` goes over --files files
# (the photos repeated, as links) into tmpfs, twice; the faster counts.
#
# imgproxy is built once into ${XDG_CACHE_HOME:-~/.cache}/imgpipe-peers/bin/imgproxy-VERSION from
# --src, a checkout of imgproxy's repository at VERSION (below): its module has a replace
# directive, so `go install MODULE@VERSION` cannot build it, and the Go module proxy does not
# serve it anyway. It needs `apt-get install -y libvips-dev`; the build is cgo, slow on 2
# cores, and runs under nice. IMGPROXY=BINARY skips the build.
#
# Environment: IMGPIPE is the CLI (default ./imgpipe, else imgpipe on PATH); PYTHON reads the
# JSON reports (default python3). Ports: --port P uses P (imgproxy) and P+1 (imgpipe serve).
set -uo pipefail

version=v3.31.4
usage() { sed -n '6,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "imgproxy.sh: $*" >&2; exit 2; }
photos="" src="" clients=8 duration=20s sweep="" files=600 port=18081
spec="decode | resize width=256 height=256 fit=inside | save format=jpeg quality=75"
while [ $# -gt 0 ]; do
  case $1 in
    --src) src=${2:?--src needs a folder}; shift 2 ;;
    --clients) clients=${2:?--clients needs a value}; shift 2 ;;
    --duration) duration=${2:?--duration needs a value}; shift 2 ;;
    --imgproxy-workers) sweep=${2:?--imgproxy-workers needs a list}; shift 2 ;;
    --files) files=${2:?--files needs a count}; shift 2 ;;
    --spec) spec=${2:?--spec needs a chain}; shift 2 ;;
    --port) port=${2:?--port needs a number}; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "imgproxy.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$photos" ] || usage; photos=$1; shift ;;
  esac
done
[ -n "$photos" ] || usage
[ -d "$photos" ] || die "$photos is not a folder"
photos=$(cd "$photos" && pwd)
cores=$(nproc)
sweep=${sweep:-$cores,$((2 * cores))}
[[ $clients =~ ^[1-9][0-9]*$ && $files =~ ^[1-9][0-9]*$ && $port =~ ^[1-9][0-9]*$ && $sweep =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  die "--clients, --files and --port are counts, --imgproxy-workers a list of counts"
imgpipe=${IMGPIPE:-./imgpipe}
[ -x "$imgpipe" ] || imgpipe=$(command -v imgpipe) || die "no imgpipe: set IMGPIPE or go build -o imgpipe ./cmd/imgpipe"
python=${PYTHON:-python3}

cache=${XDG_CACHE_HOME:-$HOME/.cache}/imgpipe-peers
bin=${IMGPROXY:-$cache/bin/imgproxy-$version}
if [ ! -x "$bin" ]; then
  [ -n "$src" ] || die "no $bin: give --src, a checkout of imgproxy at $version (and apt-get install -y libvips-dev)"
  mkdir -p "${bin%/*}"
  echo "imgproxy.sh: building imgproxy from $src (cgo, minutes)" >&2
  (cd "$src" && CGO_LDFLAGS_ALLOW='-s|-w' nice -n 10 go build -o "$bin" .) || die "building imgproxy failed"
fi

tmp=/dev/shm
[ -d "$tmp" ] && [ -w "$tmp" ] || tmp=${TMPDIR:-/tmp}
work=$(mktemp -d "$tmp/imgpipe-imgproxy.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# ready URL PID: waits (up to a minute) until URL answers 200, or fails when PID has exited.
ready() {
  for _ in $(seq 600); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
# stop PID: SIGTERM, then waits for it.
stop() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; }
# load NAME ARGS...: runs imgpipe bench serve with ARGS and keeps its JSON report as $work/NAME.json.
load() {
  local name=$1; shift
  "$imgpipe" bench serve "$photos" --clients "$clients" --duration "$duration" --json "$@" \
    >"$work/$name.json" 2>>"$work/log" || { echo "imgproxy.sh: the load of $name failed; see below" >&2; tail -n 5 "$work/log" >&2; return 1; }
}
# field NAME EXPR: a value of report NAME, EXPR in Python over r (the report).
field() { "$python" -c "import json, sys; r = json.load(open(sys.argv[1])); print($2)" "$work/$1.json"; }

best="" best_rate=0
for w in ${sweep//,/ }; do
  IMGPROXY_BIND=127.0.0.1:$port IMGPROXY_LOCAL_FILESYSTEM_ROOT=$photos IMGPROXY_WORKERS=$w \
    IMGPROXY_LOG_LEVEL=error "$bin" >>"$work/log" 2>&1 &
  pid=$! pids+=("$pid")
  ready "http://127.0.0.1:$port/health" "$pid" || die "imgproxy did not start: $(tail -n 3 "$work/log")"
  load "imgproxy-$w" --get "http://127.0.0.1:$port/insecure/rs:fit:256:256:0/q:75/plain/local:///{name}@jpg"
  stop "$pid"
  rate=$(field "imgproxy-$w" 'r["saturated"]["req_per_s"]') || die "no report from the imgproxy load"
  echo "imgproxy, IMGPROXY_WORKERS=$w: $rate req/s" >&2
  if awk -v a="$rate" -v b="$best_rate" 'BEGIN { exit !(a > b) }'; then best=$w best_rate=$rate; fi
done

serve_port=$((port + 1))
"$imgpipe" serve --listen "127.0.0.1:$serve_port" --device cpu >>"$work/log" 2>&1 &
pid=$! pids+=("$pid")
ready "http://127.0.0.1:$serve_port/readyz" "$pid" || die "imgpipe serve did not start: $(tail -n 3 "$work/log")"
load serve --url "http://127.0.0.1:$serve_port" -p "$spec" --rss-pid "$pid"
stop "$pid"

# imgpipe run over --files files, the photos repeated under new names.
mapfile -t sources < <(find "$photos" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) | sort)
[ ${#sources[@]} -gt 0 ] || die "no JPEG in $photos"
mkdir -p "$work/in"
for ((i = 0; i < files; i++)); do
  s=${sources[i % ${#sources[@]}]}
  ln "$s" "$work/in/$i-${s##*/}" 2>/dev/null || cp "$s" "$work/in/$i-${s##*/}"
done
run_s=""
for _ in 1 2; do
  rm -rf "$work/out"
  t0=$EPOCHREALTIME
  "$imgpipe" run -i "$work/in" -o "$work/out" -p "$spec" --device cpu --progress none --quiet 2>>"$work/log" ||
    die "imgpipe run failed: $(tail -n 3 "$work/log")"
  t=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
  run_s=$(awk -v a="$t" -v b="$run_s" 'BEGIN { print (b == "" || a < b) ? a : b }')
done
run_rate=$(awk -v n="$files" -v s="$run_s" 'BEGIN { printf "%.1f", n / s }')

row() {  # row LABEL REPORT
  "$python" - "$work/$2.json" "$1" "$best_rate" "$run_rate" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); s = r["saturated"]; l = s["latency_ms"]
rate, proxy, run = s["req_per_s"], float(sys.argv[3]), float(sys.argv[4])
errs = ", ".join(f"{k}: {v}" for k, v in sorted(s.get("errors", {}).items())) or "none"
print(f"| {sys.argv[2]} | {rate:.1f} | {s['mpix_per_s']:.1f} | {l['p50']:.1f} | {l['p99']:.1f} | {errs} | {rate / proxy:.2f} | {rate / run:.2f} |")
EOF
}
echo "imgproxy.sh $(date -u +%FT%TZ): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $cores cores; $clients clients, $duration each"
echo "imgproxy $version on libvips $(pkg-config --modversion vips 2>/dev/null || echo '?'); $("$imgpipe" version 2>/dev/null | head -n 1)"
echo "photos: $(field serve 'r["photos"]') under $photos ($(field serve 'r["photo_mp_mean"]') MP mean); imgpipe's chain: $spec"
echo
echo "| system | req/s | MP/s | p50 ms | p99 ms | errors | vs imgproxy | vs imgpipe run |"
echo "|---|---|---|---|---|---|---|---|"
row "imgproxy (IMGPROXY_WORKERS=$best)" "imgproxy-$best"
row "imgpipe serve --device cpu" serve
echo "| imgpipe run --device cpu, $files files | $run_rate img/s | | | | | $(awk -v a="$run_rate" -v b="$best_rate" 'BEGIN { printf "%.2f", a / b }') | 1.00 |"
echo
echo "Targets (issue 44, CPU): serve ≥ 1.5× imgproxy, and ≥ 0.9× imgpipe run. imgpipe serve's RSS at the end: $(field serve 'r["rss"]["mib"]') MiB (peak $(field serve 'r["rss"]["peak_mib"]') MiB)."
