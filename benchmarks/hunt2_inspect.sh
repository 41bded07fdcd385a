#!/usr/bin/env bash
# The hunt, round 2, item 8 (docs/hunt.md): the needle mass of one arm's run, as round 1 measured it: the
# global layer's query that predicts the answer, at 1x, 4x and 16x (64, 256, 1,024 bytes), 20 documents a
# depth at depths 0-100, 12-symbol copy needles (the sweep's) in the held-out formats, and the two tasks
# (kvthread forward and backward apart, ordinal) at their default sizes, as the sweep scores them.
#   benchmarks/hunt2_inspect.sh RUN_DIR OUT_DIR
set -euo pipefail
RUN=$1
OUT=$2
mkdir -p "$OUT"
COMMON=(--needle-mass --lengths 64,256,1024 --depths 0,25,50,75,100 --samples 20 --threads 1 --no-progress)
for F in python hex caret; do
  python -m lexkit inspect "$RUN" "${COMMON[@]}" --task copy --format "$F" --size 12 \
    --json "$OUT/mass-$F.json" > "$OUT/mass-$F.txt"
done
for T in kvthread kvthread:direction=backward ordinal; do
  NAME=${T//[:=]/-}
  python -m lexkit inspect "$RUN" "${COMMON[@]}" --task "$T" --json "$OUT/mass-$NAME.json" \
    > "$OUT/mass-$NAME.txt"
done
