#!/bin/sh
# On an NVIDIA machine: builds the CUB fidelity programs with nvcc and real CUB, runs them and
# leaves in $OUT the outputs (<family>.bin), the TempStorage sizes (sizes.txt) and build.log.
# Usage: OUT=dir sh tests/sim/cub_fidelity/run_gpu.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
python3 "$here/cases.py" prepare "$work" || exit 1
cd "$work" || exit 1
{ nvcc --version | tail -n 2; nvidia-smi -L; } > "$OUT/build.log" 2>&1
for f in load reduce scan warp small sizes_*.cu; do
  f=${f%.cu}
  (nvcc -std=c++17 -O2 -arch=sm_90 -I"$here" -o "$f" "$f.cu" > "$f.log" 2>&1
   echo "$f rc=$?" >> status) &
done
wait
cat status | tee -a "$OUT/build.log"
for fam in load reduce scan warp small; do
  if [ -x "$fam" ]; then ./"$fam" "inputs_$fam.bin" "$OUT/$fam.bin"; fi
done
for s in sizes_*; do
  case "$s" in *.cu|*.log) ;; *) ./"$s" ;; esac
done > "$OUT/sizes.txt"
for f in *.log; do echo "== $f"; head -c 3000 "$f"; done >> "$OUT/build.log"
wc -l "$OUT/sizes.txt"; ls -la "$OUT"
