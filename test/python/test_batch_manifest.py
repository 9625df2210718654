"""trellis.exe --inputs as a resumable batch (CPU reference, tiny preset): malformed entries recorded as
failed.json while the good ones complete; two shards together give the single run's outputs bit for bit; a run
killed mid-way resumes without redoing finished jobs; --retry-failed; --summarize."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from _serve import tiny_program

OUTPUTS = ("coords.npy", "slat.npy", "gaussians.ply", "gaussians.npz")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_program(tmp_path_factory.mktemp("batch"))


def manifest(path: Path, model: Path, entries):
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries))
    return path


def job(i, model, **extra):
    return {
        "id": f"j{i}",
        "cond": str(model / "cond.npy"),
        "seed": i,
        "ss": {"steps": 2},
        "slat": {"steps": 2},
        "formats": ["gs"],
        **extra,
    }


def run(exe, model, m, out, *args, **kw):
    return subprocess.run(
        [str(exe), "--model", str(model), "--inputs", str(m), "--out", str(out), "--threads", "2", *args],
        capture_output=True,
        text=True,
        **kw,
    )


def test_malformed_entries_are_recorded_and_the_rest_completes(tiny, tmp_path):
    model, exe = tiny
    np.save(tmp_path / "wrong.npy", np.zeros((1, 20, 128), np.float32))
    m = manifest(
        tmp_path / "m.jsonl",
        model,
        [
            job(0, model, formats=["gs", "mesh"]),
            {"id": "missing", "cond": "nope.npy", "seed": 1},
            {"id": "shape", "cond": "wrong.npy", "seed": 1},
            {"id": "seed", "cond": str(model / "cond.npy"), "seed": -3},
            job(1, model, formats=["gs", "mesh"]),
            "{not json",
        ],
    )
    r = run(exe, model, m, tmp_path / "out")
    assert r.returncode == 1, r.stderr  # some failed, all recorded
    out = tmp_path / "out"
    for good in ("j0", "j1"):
        done = json.loads((out / good / "done.json").read_text())
        assert done["id"] == good and done["voxels"] > 0 and done["backend"] == "cpu"
        assert len(done["program_crc32"]) == 8 and done["shard"] == "0/1"
        assert all((out / good / f).is_file() for f in ("coords.npy", "gaussians.ply", "mesh.glb"))
        assert not (out / good / "radiance_field.npz").exists()  # the entry's formats
    messages = {
        d: json.loads((out / d / "failed.json").read_text())["error"] for d in ("missing", "shape", "seed")
    }
    assert (
        "m.jsonl:2: cond: cannot open" in messages["missing"] and "nope.npy" in messages["missing"]
    ), messages
    assert "[1, 20, 128]" in messages["shape"] and "1x21x128" in messages["shape"], messages
    assert "field 'seed' must be an integer in 0..2^64-1, found -3" in messages["seed"], messages
    assert (
        "expected one JSON object per line"
        in json.loads((out / "line-6" / "failed.json").read_text())["error"]
    )
    assert sorted(os.listdir(out)) == ["j0", "j1", "line-6", "missing", "seed", "shape"]  # no temporary left

    table = subprocess.run([str(exe), "--summarize", str(out)], capture_output=True, text=True)
    assert table.returncode == 1, table.stdout
    assert "| 2 | 4 |" in table.stdout, table.stdout
    assert "failed missing: " in table.stdout and "m.jsonl:2: cond: cannot open" in table.stdout

    # A rerun skips every recorded job; --retry-failed runs the failed ones again.
    again = run(exe, model, m, out)
    assert "skipped 2 done earlier and 4 failed earlier" in again.stderr, again.stderr
    before = (out / "j0" / "done.json").read_text()
    retry = run(exe, model, m, out, "--retry-failed")
    assert "0 of 4 generations" in retry.stderr and "skipped 2 done earlier" in retry.stderr, retry.stderr
    assert (out / "j0" / "done.json").read_text() == before


def same_outputs(a: Path, b: Path, ids):
    for i in ids:
        for f in OUTPUTS:
            assert (a / i / f).read_bytes() == (b / i / f).read_bytes(), (i, f)


def test_two_shards_give_the_single_runs_outputs_bit_for_bit(tiny, tmp_path):
    model, exe = tiny
    m = manifest(tmp_path / "m.jsonl", model, [job(i, model) for i in range(4)])
    assert run(exe, model, m, tmp_path / "one").returncode == 0
    env = dict(os.environ, SLURM_ARRAY_TASK_ID="7", SLURM_ARRAY_TASK_MIN="6", SLURM_ARRAY_TASK_COUNT="2")
    a = run(exe, model, m, tmp_path / "two", "--shard", "0/2")
    b = run(exe, model, m, tmp_path / "two", env=env)  # Slurm's task 7 of 6..7: shard 1/2
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert "shard 0/2: 2 of 4" in a.stderr and "shard 1/2: 2 of 4" in b.stderr, b.stderr
    shards = {json.loads((tmp_path / "two" / f"j{i}" / "done.json").read_text())["shard"] for i in range(4)}
    assert shards == {"0/2", "1/2"}
    same_outputs(tmp_path / "one", tmp_path / "two", [f"j{i}" for i in range(4)])
    bad = run(exe, model, m, tmp_path / "x", "--shard", "2/2")
    assert bad.returncode == 2 and "--shard must be I/N with 0 <= I < N, found '2/2'" in bad.stderr


def test_a_killed_run_resumes_without_redoing_finished_jobs(tiny, tmp_path):
    model, exe = tiny
    m = manifest(tmp_path / "m.jsonl", model, [job(i, model) for i in range(4)])
    out = tmp_path / "out"
    p = subprocess.Popen(
        [str(exe), "--model", str(model), "--inputs", str(m), "--out", str(out), "--threads", "2"],
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while not (out / "j1" / "done.json").exists() and time.time() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) == 143
    finished = {d.name: (d / "done.json").read_text() for d in out.iterdir() if (d / "done.json").exists()}
    assert {"j0", "j1"} <= set(finished) and len(finished) < 4, sorted(finished)
    assert all(not d.name.startswith(".") or "tmp" in d.name for d in out.iterdir())
    r = run(exe, model, m, out)
    assert r.returncode == 0, r.stderr
    assert f"skipped {len(finished)} done earlier" in r.stderr, r.stderr
    for name, record in finished.items():  # not computed twice
        assert (out / name / "done.json").read_text() == record
    assert sorted(os.listdir(out)) == ["j0", "j1", "j2", "j3"]  # the dead run's temporary folder removed
    assert run(exe, model, m, tmp_path / "ref").returncode == 0
    same_outputs(tmp_path / "ref", out, [f"j{i}" for i in range(4)])
