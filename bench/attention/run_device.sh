#!/usr/bin/env bash
# Everything the GPU machine runs, in one call (the device `run` tool carries build-attn/):
#   SASS check (HGMMA present, no local memory), GPU correctness test, compute-sanitizer memcheck
#   on a small varlen case, then the benchmark table. Results and logs go to $OUT.
#   bash bench/attention/run_device.sh [build-attn] [extra bench.py args...]
set -uo pipefail
B=${1:-build-attn}
shift || true
OUT=${OUT:-/tmp/attn-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}

echo "== device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
  --format=csv | tee "$OUT/smi.txt"

echo "== SASS (sm_90a cubin): HGMMA / local-memory instructions per kernel"
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$B/attention_sm90a.cubin" > "$OUT/sm90a.sass" 2>&1
  awk '/Function :/{f=$3} /HGMMA/{g[f]++} /LDL|STL/{l[f]++} END{for (k in g) printf "%-40s HGMMA %4d  LDL/STL %d\n", k, g[k], l[k]+0}' \
    "$OUT/sm90a.sass" | sort
  gzip -f "$OUT/sm90a.sass"
fi

echo "== correctness test (all configurations, fp64 CPU reference)"
timeout 300 "$B/attn_test" --sm90 "$B/attention_sm90a.cubin" --sm80 "$B/attention_sm80.ptx" \
  --sm75 "$B/attention_sm75.ptx" 2>&1 | tee "$OUT/attn_test.log"
echo "attn_test exit ${PIPESTATUS[0]}"

echo "== compute-sanitizer memcheck, small varlen case"
for cfg in trellis_attn_sm90_d64_m128_n128_s3:--sm90:attention_sm90a.cubin \
           trellis_attn_sm90_d64_m256_n64_s4_mbrs:--sm90:attention_sm90a.cubin \
           trellis_attn_sm90_d64_m192_n128_s3_mbrs:--sm90:attention_sm90a.cubin \
           trellis_attn_sm90_d80_m128_n64_s4:--sm90:attention_sm90a.cubin \
           trellis_attn_sm80_d80_m64_n64_s2:--sm80:attention_sm80.ptx; do
  IFS=: read -r name flag file <<<"$cfg"
  timeout 240 compute-sanitizer --tool memcheck --leak-check full "$B/attn_test" "$flag" "$B/$file" \
    --config "$name" --case varlen-packed-rms 2>&1 | tail -4 | tee -a "$OUT/memcheck.log"
done

echo "== benchmark"
timeout 420 python3 bench/attention/bench.py --build "$B" --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader | tee -a "$OUT/smi.txt"
