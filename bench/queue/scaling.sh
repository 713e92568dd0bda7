#!/usr/bin/env bash
# Queue scaling on this machine's CPU path: `imgpipe run` over N images, then the same
# images through a local `nats-server -js` with 1, 2 and 4 worker processes (the cores
# split between them), timed from the workers' start to `imgpipe wait`'s end. Checks that
# every queue run's outputs are byte for byte those of `imgpipe run`.
# Usage (from the repository root): bash bench/queue/scaling.sh [N]   (default 300)
set -euo pipefail
N=${1:-300}
PORT=${PORT:-14222}
cores=$(nproc)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/imgpipe" ./cmd/imgpipe
go build -o "$work/nats-server" github.com/nats-io/nats-server/v2
mkdir "$work/in"
srcs=(samples/images/*.jpg samples/images/*.png samples/images/night/*)
for ((i = 0; i < N; i++)); do
	f=${srcs[i % ${#srcs[@]}]}
	cp "$f" "$work/in/$(printf %04d "$i")-$(basename "$f")"
done
"$work/nats-server" -js -sd "$work/js" -a 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
url=nats://127.0.0.1:$PORT
for ((i = 0; i < 100; i++)); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
chain='decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png'
now() { date +%s.%N; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# One timing of config $1 (0: imgpipe run; P: P worker processes), round $2, in seconds.
timeit() {
	local p=$1 r=$2 s e w
	if ((p == 0)); then
		rm -rf "$work/out-run"
		s=$(now)
		"$work/imgpipe" run -i "$work/in" -o "$work/out-run" -p "$chain" --device cpu --workers "$cores" -q || true
		e=$(now)
	else
		w=$((cores / p)); ((w >= 1)) || w=1
		local name="scale$p-$r" pids=()
		rm -rf "$work/out-$p"
		"$work/imgpipe" submit -i "$work/in" -o "$work/out-$p" -p "$chain" --queue "$url" --name "$name" -q >/dev/null
		s=$(now)
		for ((k = 0; k < p; k++)); do
			"$work/imgpipe" worker --queue "$url" --name "$name" --device cpu --workers "$w" --exit-when-idle 1s -q &
			pids+=($!)
		done
		"$work/imgpipe" wait --queue "$url" --name "$name" --report "$work/rep-$p.jsonl" -q || true
		e=$(now)
		wait "${pids[@]}"
		diff -r -x imgpipe-report.jsonl "$work/out-run" "$work/out-$p" >/dev/null || { echo "outputs of $p processes differ from run's" >&2; exit 1; }
	fi
	echo "$e - $s" | bc
}
ROUNDS=${ROUNDS:-3}
declare -A times
timeit 0 0 >/dev/null # the reference outputs, and a warm-up
for ((r = 1; r <= ROUNDS; r++)); do # rounds interleave the configurations: load from
	for p in 0 1 2 4; do             # other processes hits them all alike
		times[$p]+="$(timeit "$p" "$r") "
	done
done
base=$(median ${times[0]})
printf 'imgpipe run, %d workers:       median %.2fs  %6.1f img/s  (runs: %s)\n' "$cores" "$base" "$(echo "$N / $base" | bc -l)" "${times[0]}"
for p in 1 2 4; do
	t=$(median ${times[$p]})
	printf 'queue, %d worker processes:    median %.2fs  %6.1f img/s  %3.0f%% of run  (runs: %s)\n' "$p" "$t" "$(echo "$N / $t" | bc -l)" "$(echo "100 * $base / $t" | bc -l)" "${times[$p]}"
done
echo "outputs identical to imgpipe run's in every case"
