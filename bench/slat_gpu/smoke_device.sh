#!/bin/bash
# Device smoke tests / measurements of the SLat PyTorch baseline and parity script. Results under $OUT.
#   smoke_device.sh [tiny] [large-eager] [large-compile] [large-both] [dec] [N=20000]   (N= applies to later words)
# tiny:        selftest; tiny random weights, both modes; a random tiny model dir → 1-step and 25-step latents of the
#              PyTorch fp16 model fed to parity.py as "GPU outputs" (checks the parity pipeline; numbers = torch
#              fp16 vs fp32).
# large-*:     image-large shapes, random weights, synthetic shell of N voxels, fp16, 25-step stage timing.
# dec:         decoder trunk + GS/RF heads (bench/pytorch/slat_decoders.py): window selftest, tiny, then large at N.
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/slat_out}; mkdir -p "$O"
T=$(mktemp -d)
N=20000
cd "$(dirname "$0")/../pytorch" || exit 1
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
for w in "$@"; do case $w in
N=*) N=${w#N=} ;;
tiny)
  python3 slat_stage.py --selftest --preset tiny --synthetic-voxels 1500 --mode both --stage-reps 2 --fwd-reps 3 \
      --save-coords "$T/c.npy" --save-noise "$T/x0.npy" --json "$O/tiny_fp16.json" 2>&1 | tee "$O/tiny.log"
  python3 slat_stage.py --write-model "$T/m" --preset tiny --seed 5
  python3 slat_stage.py --model "$T/m" --coords "$T/c.npy" --noise "$T/x0.npy" --cond "$T/m/cond.npy" \
      --precision fp16 --mode eager --steps 1 --cfg 0 --stage-reps 1 --fwd-reps 1 --save-latent "$T/l1.npy" \
      > "$T/l1.log" 2>&1 || tail -20 "$T/l1.log"
  python3 slat_stage.py --model "$T/m" --coords "$T/c.npy" --noise "$T/x0.npy" --cond "$T/m/cond.npy" \
      --precision fp16 --mode eager --stage-reps 1 --fwd-reps 1 --save-latent "$T/l25.npy" > "$T/l25.log" 2>&1 \
      || tail -20 "$T/l25.log"
  python3 ../slat_gpu/parity.py --model "$T/m" --coords "$T/c.npy" --cond "$T/m/cond.npy" --noise "$T/x0.npy" \
      --latent1 "$T/l1.npy" --full-latent "$T/l25.npy" --normalized --also-fp16 --json "$O/parity_tiny.json" 2>&1 \
      | tee "$O/parity_tiny.log"
  ;;
large-eager|large-compile|large-both)
  python3 slat_stage.py --preset large --synthetic-voxels "$N" --mode "${w#large-}" --stage-reps 3 --fwd-reps 5 \
      --json "$O/large_${w#large-}_$N.json" 2>&1 | tee "$O/large_${w#large-}_$N.log" ;;
dec)
  python3 slat_decoders.py --selftest --preset tiny --synthetic-voxels 1500 --mode both --reps 3 2>&1 | tail -12
  python3 slat_decoders.py --preset large --synthetic-voxels "$N" --mode both --reps 10 --json "$O/dec_$N.json" \
      2>&1 | tee "$O/dec_$N.log" ;;
*) echo "unknown: $w" ;;
esac; done
