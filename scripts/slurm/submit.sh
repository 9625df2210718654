#!/usr/bin/env bash
# Submits a trellis.exe manifest to Slurm as a job array plus a summary job
# (docs/guide/scale-out.md).
#
#   scripts/slurm/submit.sh MANIFEST OUT --tasks N [options] [sbatch options] [-- trellis.exe options]
#
#   --tasks N            array tasks = shards (task i runs the manifest lines
#                        with index = i mod N); at most the number of lines
#   --program P          the compiled trellis.exe (default ./trellis.exe)
#   --model DIR          the model directory (default $TRELLIS_MODEL)
#   --gpus-per-task 0|1  1 (default): --gres=gpu:1; 0: --gres=none (CPU clusters)
#   --max-running K      at most K tasks at once (--array=0-(N-1)%K)
#   --dry-run            print the sbatch commands instead of running them
#   other options starting with '-' go to both sbatch calls (e.g.
#   --partition=gpu --account=x --time=4:00:00 --cpus-per-task=16; use the
#   --opt=value form); after '--', options for trellis.exe (e.g. --steps-ss 25)
#
# Prints on stdout "array_job_id=ID" and "summary_job_id=ID"; the summary job
# runs after the array whatever its outcome (afterany) and writes
# `PROGRAM --summarize OUT` to OUT/summary.txt. Task logs: OUT/.slurm/.
# Running it again on the same OUT resumes: done (and failed) ids are skipped.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sbatch_script="$here/trellis-array.sbatch"
me=submit.sh

die() {
  echo "$me: error: $*" >&2
  echo "usage: $me MANIFEST OUT --tasks N [--program P] [--model DIR] [--gpus-per-task 0|1]" \
    "[--max-running K] [--dry-run] [sbatch options] [-- trellis.exe options]" >&2
  exit 2
}
fail() { # a failure that is not a usage error
  echo "$me: error: $*" >&2
  exit 1
}
abspath() { realpath -m -s -- "$1"; } # absolute, normalized, symlinks kept; need not exist
is_count() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }

positional=() sbatch_extra=() trellis_opts=()
tasks="" program="./trellis.exe" model="${TRELLIS_MODEL:-}" gpus=1 max_running="" dry_run=0
while (($#)); do
  case "$1" in
    --tasks | --program | --model | --gpus-per-task | --max-running)
      (($# >= 2)) || die "$1 needs a value"
      case "$1" in
        --tasks) tasks=$2 ;;
        --program) program=$2 ;;
        --model) model=$2 ;;
        --gpus-per-task) gpus=$2 ;;
        --max-running) max_running=$2 ;;
      esac
      shift 2
      ;;
    --tasks=* | --program=* | --model=* | --gpus-per-task=* | --max-running=*)
      v=${1#*=}
      case "$1" in
        --tasks=*) tasks=$v ;;
        --program=*) program=$v ;;
        --model=*) model=$v ;;
        --gpus-per-task=*) gpus=$v ;;
        --max-running=*) max_running=$v ;;
      esac
      shift
      ;;
    --dry-run) dry_run=1 && shift ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    --)
      shift
      trellis_opts=("$@")
      break
      ;;
    --array | --array=* | -a | -a*) die "the array is --tasks N (and --max-running K), not $1" ;;
    --dependency | --dependency=* | -d | -d*) die "$1: submit.sh sets the summary job's dependency itself" ;;
    -*) sbatch_extra+=("$1") && shift ;;
    *) positional+=("$1") && shift ;;
  esac
done

((${#positional[@]} == 2)) || die "expected MANIFEST and OUT, found ${#positional[@]} positional argument(s)${positional[*]:+: ${positional[*]}} (sbatch options take the --opt=value form)"
manifest=$(abspath "${positional[0]}")
out=$(abspath "${positional[1]}")

[[ -n "$tasks" ]] || die "--tasks N is required (the array size)"
is_count "$tasks" || die "--tasks expects a whole number >= 1, found '$tasks'"
[[ -z "$max_running" ]] || is_count "$max_running" || die "--max-running expects a whole number >= 1, found '$max_running'"
[[ "$gpus" == 0 || "$gpus" == 1 ]] || die "--gpus-per-task expects 0 or 1 (one engine per GPU), found '$gpus'"
[[ -f "$manifest" && -r "$manifest" ]] || die "manifest '${positional[0]}' is not a readable file"
[[ -n "$model" ]] || die "--model DIR is required (or set TRELLIS_MODEL)"
model=$(abspath "$model")
[[ -d "$model" ]] || die "model directory '$model' does not exist"
[[ -f "$model/pipeline.json" ]] || die "'$model' is not a model directory (no pipeline.json)"
case "$program" in */*) ;; *) program=$(command -v "$program" || echo "$program") ;; esac
program=$(abspath "$program")
[[ -f "$program" && -x "$program" ]] || die "program '$program' is not an executable file (--program)"
[[ -f "$sbatch_script" ]] || die "missing $sbatch_script"
if ((!dry_run)); then
  command -v sbatch >/dev/null || die "sbatch not found on PATH (is this a Slurm login node?)"
fi

# Shards = non-blank lines mod N (trellis.exe counts malformed lines too).
lines=$(grep -c '[^[:space:]]' "$manifest" || true)
((lines > 0)) || die "manifest '$manifest' has no entries"
if ((tasks > lines)); then
  echo "$me: note: --tasks $tasks > $lines manifest entries; submitting $lines tasks" >&2
  tasks=$lines
fi

array="0-$((tasks - 1))${max_running:+%$max_running}"
if ((gpus)); then gres="--gres=gpu:1"; else gres="--gres=none"; fi
logs="$out/.slurm"

array_cmd=(sbatch --parsable --array="$array" "$gres" --output="$logs/trellis-%A_%a.out"
  "${sbatch_extra[@]}" "$sbatch_script" "$program" "$model" "$manifest" "$out" "${trellis_opts[@]}")
# shellcheck disable=SC2016 # $? and $status belong to the summary job's shell
printf -v summary_wrap '%q --summarize %q > %q; status=$?; cat %q; exit $status' \
  "$program" "$out" "$out/summary.txt" "$out/summary.txt"
summary_args() { # sets summary=(sbatch ...) for the array job id $1
  summary=(sbatch --parsable --job-name=trellis-summary --output="$logs/summary-%j.out"
    "${sbatch_extra[@]}" --gres=none --ntasks=1 --cpus-per-task=1 --dependency=afterany:"$1"
    --wrap="$summary_wrap")
}

if ((dry_run)); then
  summary_args ARRAY_JOB_ID
  printf '%q ' "${array_cmd[@]}" && echo
  printf '%q ' "${summary[@]}" && echo
  exit 0
fi

mkdir -p "$logs"
array_id=$("${array_cmd[@]}") || fail "sbatch refused the array (its message is above)"
array_id=${array_id%%;*}
summary_args "$array_id"
summary_id=$("${summary[@]}") || {
  echo "$me: error: the array $array_id was submitted, but sbatch refused the summary job;" \
    "run '$program --summarize $out' when it is done" >&2
  echo "array_job_id=$array_id"
  exit 1
}
summary_id=${summary_id%%;*}
echo "$me: array job $array_id: $tasks task(s) over $lines manifest entries -> $out (logs: $logs)" >&2
echo "$me: summary job $summary_id after it: $out/summary.txt" >&2
echo "array_job_id=$array_id"
echo "summary_job_id=$summary_id"
