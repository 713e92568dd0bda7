# timing.sh: the helpers bench/thumbnails.sh and bench/serve.sh share, sourced by both. They
# read $work (the scratch folder) and $sources (the photos).

# folder N: $work/inN holds N files, the photos repeated under new names.
folder() {
  local dir=$work/in$1 i=0
  mkdir -p "$dir"
  while [ "$i" -lt "$1" ]; do
    local src=${sources[i % ${#sources[@]}]}
    ln "$src" "$dir/$i-${src##*/}" 2>/dev/null || cp "$src" "$dir/$i-${src##*/}"
    i=$((i + 1))
  done
}

# timed N CMD...: runs CMD with its output on $work/out (emptied first) and prints its seconds,
# or "failed" when it fails or writes other than N thumbnails (then its stderr goes to
# $work/errors; libvips's warnings on a run that worked do not).
timed() {
  local n=$1; shift
  rm -rf "$work/out" && mkdir -p "$work/out"
  local t0=$EPOCHREALTIME rc=0
  "$@" >/dev/null 2>"$work/stderr" || rc=$?
  local t1=$EPOCHREALTIME got
  got=$(find "$work/out" -name '*.jpg' | wc -l)
  if [ "$rc" = 0 ] && [ "$got" -eq "$n" ]; then
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }'
    return
  fi
  { echo "$* (status $rc, $got of $n thumbnails):"; head -n 3 "$work/stderr"; } >>"$work/errors"
  echo failed
}

# ratio A B: A/B as "2.7", or "-" when either failed (or B rounds to 0).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "failed" || b == "failed" || b + 0 == 0) print "-"; else printf "%.1f", a / b }'; }
# joined LIST: "a, b" from "a b".
joined() { echo "$*" | sed 's/ /, /g'; }
