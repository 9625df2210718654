#!/usr/bin/env bash
# Everything the GPU machine runs, in one call (the device `run` tool carries build-attn/):
#   SASS listing (HGMMA and local-memory instructions per kernel; informational), GPU correctness test,
#   compute-sanitizer memcheck on small cases, then the benchmark table. Results and logs go to $OUT.
#   bash bench/attention/run_device.sh [build-attn] [extra bench.py args...]
# Exit status: 1 when attn_test fails a check (its own exit code; pass: no non-finite output, rel L2 < 2e-3,
# max abs < 1e-2, test/gpu/attention/README.md), when a memcheck run does not end with "ERROR SUMMARY: 0
# errors", or when bench.py reports a kernel run over its error bound (rel L2 < 3e-3, no non-finite output;
# its own exit code); else 0. Every step still runs.
set -uo pipefail
B=${1:-build-attn}
shift || true
OUT=${OUT:-/tmp/attn-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
status=0
fail() { echo "FAIL: $*"; status=1; }

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
rc=${PIPESTATUS[0]}
echo "attn_test exit $rc"
[[ $rc == 0 ]] || fail "attn_test exited $rc"

echo "== compute-sanitizer memcheck, small cases"
for cfg in trellis_attn_sm90_d64_m128_n128_s3:--sm90:attention_sm90a.cubin \
           trellis_attn_sm90_d64_m256_n64_s4_mbrs:--sm90:attention_sm90a.cubin \
           trellis_attn_sm90_d64_m192_n128_s3_mbrs:--sm90:attention_sm90a.cubin \
           trellis_attn_sm90_d80_m128_n64_s4:--sm90:attention_sm90a.cubin \
           trellis_attn_sm80_d80_m64_n64_s2:--sm80:attention_sm80.ptx \
           trellis_attn_sm90_d64_m256_n64_s4_mbrs_fx:--sm90:attention_sm90a.cubin \
           trellis_attn_sm90_d64_m192_n128_s3_mbrs_fx:--sm90:attention_sm90a.cubin \
           trellis_attn_sm90_d64_m256_n64_s4_mbrs_fx:--sm90:attention_sm90a.cubin:dense-late-peak \
           trellis_attn_sm90_d64_m192_n128_s3_mbrs_fx:--sm90:attention_sm90a.cubin:dense-late-peak; do
  # name:flag:file[:case] (default case varlen-packed-rms; dense-late-peak makes the _fx kernels redo CTAs)
  IFS=: read -r name flag file tcase <<<"$cfg"
  tcase=${tcase:-varlen-packed-rms}
  timeout 240 compute-sanitizer --tool memcheck --leak-check full "$B/attn_test" "$flag" "$B/$file" \
    --config "$name" --case "$tcase" > "$OUT/memcheck_run.log" 2>&1
  rc=$?
  { echo "-- $name $tcase (rc $rc)"; tail -4 "$OUT/memcheck_run.log"; } | tee -a "$OUT/memcheck.log"
  # attn_test exits 1 when its check fails or no check ran (an unknown configuration or case)
  [[ $rc == 0 ]] || fail "memcheck $name $tcase exited $rc"
  grep -q "ERROR SUMMARY: 0 errors" "$OUT/memcheck_run.log" || fail "memcheck $name $tcase: not 0 errors"
done
rm -f "$OUT/memcheck_run.log"

echo "== benchmark"
timeout 420 python3 bench/attention/bench.py --build "$B" --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log"
rc=${PIPESTATUS[0]}
[[ $rc == 0 ]] || fail "bench.py exited $rc (1: a kernel run over its error bound; 124: timeout)"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader | tee -a "$OUT/smi.txt"
if [[ $status == 0 ]]; then echo "== all checks passed"; else echo "== FAILED: see the FAIL lines above"; fi
exit $status
