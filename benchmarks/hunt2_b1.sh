#!/usr/bin/env bash
# The hunt, round 2, arm B1 (docs/hunt.md): a trained A3 run scored with top-k added to its global layer
# (L1) at evaluation, K in {all, 1, 2, 4, 8}: copy needles of 12 symbols in each held-out format and the
# trained one at 1x and 16x (as the round-1 64x rung was scored), and bpb paired at 1x and 16x.
#   benchmarks/hunt2_b1.sh RUN_DIR OUT_DIR
set -euo pipefail
RUN=$1
OUT=$2
mkdir -p "$OUT"
for K in all 1 2 4 8; do
  ADD=(); [ "$K" = all ] || ADD=(--add "L1=topk:$K")
  for F in python hex caret tilde; do
    python -m lexkit retrieval "$RUN" --task copy --format "$F" --size 12 --lengths 64,1024 --depths 0,25,50,75,100 \
      --samples 20 --no-cache --threads 1 --no-progress "${ADD[@]}" --json "$OUT/copy-$F-k$K.json" > "$OUT/copy-$F-k$K.txt"
  done
  python -m lexkit eval "$RUN" --lengths 64,1024 --paired --max-docs 96 --threads 1 --no-progress "${ADD[@]}" \
    --json "$OUT/bpb-k$K.json" > "$OUT/bpb-k$K.txt"
done
