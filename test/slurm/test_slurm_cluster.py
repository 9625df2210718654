"""trellis.exe under a real Slurm: scripts/slurm/submit.sh and
trellis-array.sbatch on a single-node cluster started from Debian's packages
(test/slurm/cluster.py), the tiny preset on the CPU reference.

* A 4-task array over a 12-entry manifest gives the files of a single
  process (`--inputs` without --shard) bit for bit; the summary job writes
  OUT/summary.txt.
* A task cancelled mid-run (after its first done.json) and the array
  resubmitted: the result is complete and identical, and nothing was computed
  twice (the done.json of the jobs finished before the kill are unchanged,
  and the rerun's logs show only the missing generations).
* submit.sh's argument checks.
(Malformed manifest entries without Slurm: test/python/test_batch_manifest.py.)

Needs root and slurm-wlm + munge (scripts/install-deps.sh --test); without
them the Slurm tests fail when CI=true, else they are skipped.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster import Cluster, missing_programs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TRELLIS_BUILD_DIR", ROOT / "build"))
SUBMIT = ROOT / "scripts" / "slurm" / "submit.sh"
TASKS = 4
COMPARED = (
    "ss_latent.npy",
    "coords.npy",
    "slat.npy",
    "gaussians.npz",
    "gaussians.ply",
    "mesh.ply",
    "mesh.glb",
)


def run(*args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)


def plain_env():
    """This environment without Slurm's variables (pytest may itself run in
    a Slurm job): trellis.exe must not pick a shard from them."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}


def need_slurm():
    why = None
    if missing := missing_programs():
        why = f"Slurm/munge not installed ({', '.join(missing)} missing; scripts/install-deps.sh --test)"
    elif os.geteuid() != 0:
        why = "the test cluster's slurmd needs root"
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """The tiny preset and its CPU program: (model, exe, folder)."""
    d = tmp_path_factory.mktemp("tiny")
    model, exe = d / "model", d / "tiny.exe"
    r = run(BUILD / "bin/trellis-mkmodel", "--preset", "tiny", "--seed", "1", "--out", model, "--quiet")
    assert r.returncode == 0, r.stderr
    r = run(BUILD / "bin/trellisc", model / "pipeline.json", "--target=cpu", "--cond-tokens", "21", "-o", exe)
    assert r.returncode == 0, r.stderr
    return model, exe, d


def write_manifest(folder: Path, model: Path, n: int = 12) -> Path:
    """n jobs over two conditioning files and varied seeds; 2 sampler steps;
    every fourth with the mesh (the GLB), the rest Gaussians only."""
    folder.mkdir(parents=True, exist_ok=True)
    cond = np.load(model / "cond.npy")
    np.save(folder / "cond_a.npy", cond)
    np.save(folder / "cond_b.npy", (cond[:, ::-1] * np.float32(0.75)).astype(np.float32))
    lines = []
    for i in range(n):
        job = {
            "id": f"obj{i:02d}",
            "cond": "cond_a.npy" if i % 3 else "cond_b.npy",
            "seed": 1000 + 17 * i,
            "ss": {"steps": 2, "cfg": 5.0},
            "slat": {"steps": 2},
            "formats": ["gs", "mesh"] if i % 4 == 1 else ["gs"],
        }
        lines.append(json.dumps(job))
    m = folder / "jobs.jsonl"
    m.write_text("\n".join(lines) + "\n")
    return m


def ids_of(manifest: Path) -> list:
    return [json.loads(line)["id"] for line in manifest.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def manifest(program):
    model, _, d = program
    return write_manifest(d / "jobs", model)


@pytest.fixture(scope="module")
def reference(program, manifest):
    """The whole manifest in one process, no shard."""
    model, exe, d = program
    out = d / "reference"
    r = run(exe, "--model", model, "--inputs", manifest, "--out", out, env=plain_env(), timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, program):
    need_slurm()
    _, exe, _ = program
    r = run(exe, "--help")
    assert "--shard" in r.stdout + r.stderr, "trellis.exe has no --shard (the feature the array relies on)"
    c = Cluster(tmp_path_factory.mktemp("cluster"), gpus=2)  # 2 fake GPUs: the --gres=gpu:1 path
    try:
        c.start()
        yield c
    finally:
        c.stop()  # also when start() or a test failed


def submit(c: Cluster, program, manifest: Path, out: Path, gpus: int):
    """submit.sh, one CPU per task, --gpus-per-task gpus: (array id, summary id)."""
    model, exe, _ = program
    r = c.run(
        SUBMIT, manifest, out, "--tasks", TASKS, "--program", exe, "--model", model,
        "--gpus-per-task", gpus, "--cpus-per-task=1", check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    ids = dict(re.findall(r"^(array_job_id|summary_job_id)=(\d+)$", r.stdout, re.M))
    assert set(ids) == {"array_job_id", "summary_job_id"}, r.stdout
    return ids["array_job_id"], ids["summary_job_id"]


def task_logs(c: Cluster, out: Path, array: str) -> str:
    return "".join(
        f.read_text(errors="replace") for f in sorted((out / ".slurm").glob(f"trellis-{array}_*.out"))
    )


def check_same_files(out: Path, reference: Path, ids):
    for i in ids:
        ref = reference / i
        names = sorted(p.name for p in ref.iterdir() if p.name in COMPARED)
        assert "gaussians.ply" in names, names
        got = sorted(p.name for p in (out / i).iterdir() if p.name in COMPARED)
        assert got == names, f"{i}: {got} != {names}"
        for n in names:
            assert (out / i / n).read_bytes() == (
                ref / n
            ).read_bytes(), f"{i}/{n} differs from the single-process run"


def done_json(out: Path, i: str) -> dict:
    return json.loads((out / i / "done.json").read_text())


def test_array_matches_single_process(cluster, program, manifest, reference, tmp_path):
    out = tmp_path / "out"
    t0 = time.monotonic()
    array, summary = submit(cluster, program, manifest, out, gpus=1)
    states = cluster.wait(array, timeout=300)
    logs = task_logs(cluster, out, array)
    assert sorted(states) == [f"{array}_{t}" for t in range(TASKS)], states
    assert set(states.values()) == {"COMPLETED"}, f"{states}\n{logs[-4000:]}"
    assert cluster.wait(summary, timeout=60) == {summary: "COMPLETED"}
    print(f"array of {TASKS} tasks: {time.monotonic() - t0:.1f} s")
    gpus = re.findall(r"GPUs (\S+)$", logs, re.M)  # the task header: CUDA_VISIBLE_DEVICES
    assert len(gpus) == TASKS and set(gpus) <= {"0", "1"}, logs  # one of the 2 (fake) GPUs per task

    ids = ids_of(manifest)
    check_same_files(out, reference, ids)
    # Each id was computed by the task of its shard (index mod TASKS): one
    # process per task, the jobs of a shard share it.
    pid_of = {i: done_json(out, i)["pid"] for i in ids}
    for k, i in enumerate(ids):
        assert done_json(out, i)["shard"] == f"{k % TASKS}/{TASKS}", done_json(out, i)
    for k, i in enumerate(ids):
        assert pid_of[i] == pid_of[ids[k % TASKS]], f"{i} and {ids[k % TASKS]} ran in different processes"
    assert len(set(pid_of.values())) == TASKS, pid_of
    assert not [p.name for p in out.iterdir() if ".tmp-" in p.name]

    text = (out / "summary.txt").read_text()
    assert f"| {len(ids)} | 0 |" in text, text  # jobs done | failed


def test_cancelled_task_resumes_without_recomputing(cluster, program, manifest, reference, tmp_path):
    out = tmp_path / "out"
    ids = ids_of(manifest)
    victim = 2  # the task of lines 2, 6, 10
    mine = [i for k, i in enumerate(ids) if k % TASKS == victim]

    array, summary = submit(cluster, program, manifest, out, gpus=0)
    deadline = time.monotonic() + 180
    while not (out / mine[0] / "done.json").exists():
        assert (
            time.monotonic() < deadline
        ), f"no {mine[0]}/done.json\n{task_logs(cluster, out, array)[-4000:]}"
        time.sleep(0.05)
    cluster.run("scancel", f"{array}_{victim}")
    states = cluster.wait(array, timeout=300)
    assert states[f"{array}_{victim}"] == "CANCELLED", states
    assert {s for t, s in states.items() if t != f"{array}_{victim}"} == {"COMPLETED"}, states
    cluster.wait(summary, timeout=60)  # its summary.txt, of the incomplete result, comes first

    before = {i: (out / i / "done.json").read_bytes() for i in ids if (out / i / "done.json").exists()}
    missing = [i for i in ids if i not in before]
    assert missing, "the cancelled task had finished its shard already: nothing to resume"
    assert set(missing) <= set(mine[1:]), missing

    array2, summary2 = submit(cluster, program, manifest, out, gpus=0)
    states = cluster.wait(array2, timeout=300)
    assert set(states.values()) == {"COMPLETED"}, f"{states}\n{task_logs(cluster, out, array2)[-4000:]}"
    cluster.wait(summary2, timeout=60)

    check_same_files(out, reference, ids)
    for i, data in before.items():  # finished before the kill: untouched
        assert (out / i / "done.json").read_bytes() == data, f"{i} was computed again"
    logs = task_logs(cluster, out, array2)
    generated = re.findall(r"^generation (\S+?): .*wall", logs, re.M)
    assert sorted(generated) == sorted(missing), f"the rerun computed {generated}, expected {missing}\n{logs}"
    skipped = sum(int(n) for n in re.findall(r"skipped (\d+) done earlier", logs))
    assert skipped == len(before), logs
    first_pids = {done_json(out, i)["pid"] for i in before}
    for i in missing:
        assert done_json(out, i)["pid"] not in first_pids, i
    assert not [p.name for p in out.iterdir() if ".tmp-" in p.name]
    text = (out / "summary.txt").read_text()
    assert f"| {len(ids)} | 0 |" in text, text


def test_submit_checks_its_arguments(program, tmp_path):
    """submit.sh without Slurm: --dry-run prints the two sbatch commands;
    bad arguments are usage errors (exit 2) that say what is wrong."""
    model, exe, _ = program
    m = tmp_path / "m.jsonl"
    m.write_text('{"id": "a", "cond": "c.npy", "seed": 1}\n\n{"id": "b", "cond": "c.npy", "seed": 2}\n')
    base = [SUBMIT, m, tmp_path / "out", "--program", exe, "--model", model]
    r = run(
        *base, "--tasks", "5", "--gpus-per-task", "0", "--partition=p", "--dry-run", "--", "--steps-ss", "2"
    )
    assert r.returncode == 0, r.stderr
    array, summary = r.stdout.splitlines()
    assert "--array=0-1 " in array and "--gres=none" in array and "--partition=p" in array, array
    assert array.endswith(f"{tmp_path / 'out'} --steps-ss 2 ")
    assert "--tasks 5 > 2 manifest entries" in r.stderr
    assert "--dependency=afterany:ARRAY_JOB_ID" in summary and "--summarize" in summary, summary
    r = run(*base, "--tasks", "2", "--max-running", "1", "--dry-run")
    assert "--array=0-1%1 --gres=gpu:1 " in r.stdout, r.stdout
    for args, message in [
        (["--tasks", "0"], "--tasks expects a whole number >= 1, found '0'"),
        ([], "--tasks N is required"),
        (["--tasks", "2", "--gpus-per-task", "2"], "--gpus-per-task expects 0 or 1"),
        (["--tasks", "2", "--array=0-3"], "the array is --tasks N"),
        (["--tasks", "2", "-p", "gpu"], "found 3 positional argument(s)"),
        (["--tasks", "2", "--model", tmp_path], "is not a model directory (no pipeline.json)"),
        (["--tasks", "2", "--program", tmp_path / "nope"], "is not an executable file"),
    ]:
        r = run(*base, *args, "--dry-run")
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)
    r = run(SUBMIT, tmp_path / "none.jsonl", tmp_path / "out", "--tasks", "1", "--model", model, "--dry-run")
    assert r.returncode == 2 and "is not a readable file" in r.stderr, r.stderr
