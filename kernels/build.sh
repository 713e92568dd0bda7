#!/usr/bin/env bash
# build.sh: compile kernels/*.cu into kernels/imgpipe.fatbin and record the source hash.
#
# Each stage's kernels live in their own file (kernels/<stage>.cu, sharing common.cuh and, for
# the separable filters, separable.cuh). They are compiled as one translation unit that includes
# every *.cu, so adding a stage's kernel file needs no edit here and the result is one module.
#
# Runs where nvcc is (the GPU machine: CUDA 13, /usr/local/cuda/bin/nvcc), from any folder:
#   bash kernels/build.sh          # or: bash kernels/build.sh --hash (print the source hash only)
# It writes kernels/imgpipe.fatbin (SASS for sm_75, sm_80, sm_86, sm_89 and sm_90, plus PTX for
# compute_75 so that newer GPUs JIT it) and kernels/imgpipe.fatbin.sha256, the source hash defined
# below. When $OUT is set, both are also copied there (the device tool brings $OUT back), with
# ptxas's resource report as build.log.
#
# Source hash (kernels.SourceHash; TestFatbinFresh recomputes it on the CPU): the lowercase hex
# SHA-256 of, for each file in kernels/ named *.cu, *.cuh or build.sh, taken in byte order of the
# names (LC_ALL=C sort): the file name, a newline, then the file's bytes. The build script itself is
# included because its nvcc flags shape the binary as much as the sources do.
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}

srchash() (
  shopt -s nullglob
  printf '%s\n' *.cu *.cuh build.sh | LC_ALL=C sort | while IFS= read -r f; do
    printf '%s\n' "$f"
    cat -- "$f"
  done | sha256sum | cut -d' ' -f1
)
if [ "${1:-}" = --hash ]; then srchash; exit 0; fi

gencode=(
  -gencode arch=compute_75,code=sm_75
  -gencode arch=compute_80,code=sm_80
  -gencode arch=compute_86,code=sm_86
  -gencode arch=compute_89,code=sm_89
  -gencode arch=compute_90,code=sm_90
  -gencode arch=compute_75,code=compute_75
)
"$NVCC" --version | tail -n 2
# -Xptxas -v prints registers, shared memory, stack frame and spills per kernel and target: a kernel
# that spills or indexes a register array at run time shows a non-zero stack frame there.
unit=$(mktemp --suffix=.cu)
trap 'rm -f "$unit"' EXIT
for f in *.cu; do printf '#include "%s/%s"\n' "$PWD" "$f"; done > "$unit"
"$NVCC" -O3 --fatbin -std=c++17 "${gencode[@]}" -Xptxas -v -I "$PWD" \
  -o imgpipe.fatbin "$unit" 2> build.log || { cat build.log >&2; exit 1; }
grep -E 'error|warning' build.log >&2 || true
srchash > imgpipe.fatbin.sha256
echo "built imgpipe.fatbin ($(wc -c < imgpipe.fatbin) bytes), source hash $(cat imgpipe.fatbin.sha256)"
if [ -n "${OUT:-}" ]; then
  cp imgpipe.fatbin imgpipe.fatbin.sha256 "$OUT/"
  cp build.log "$OUT/build.log"
fi
rm -f build.log
