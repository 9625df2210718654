"""The device memory planner on image-large, without a GPU.

`trellis-mkmodel --layout-only` writes image-large's checkpoints as headers
with holes (no disk, no weights): enough for trellisc and for
`trellis.exe --inspect`, which plans every GPU stage's memory on the host
(GpuExecutor::planMemory) and the whole pipeline in each form. These tests pin
what a run under --memory-budget would do: a 6 GB and a 4 GB budget take the
low-memory form, an 80 GB one the default form, and a budget no form fits is
refused with the stage and its bytes (exit 1). The same plans decided the
device runs of bench/portable/run_device.sh (budget step), where the planned
low-memory peak matched the measured allocation peak."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TRELLIS_BUILD_DIR", ROOT / "build"))
BIN = BUILD / "bin"


def run(*args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    d = tmp_path_factory.mktemp("budget")
    model = d / "model"
    r = run(BIN / "trellis-mkmodel", "--preset", "image-large", "--out", model, "--layout-only", "--quiet")
    assert r.returncode == 0, r.stderr
    # Holes: the directory takes (almost) no disk, whatever the files' sizes say.
    ckpt = model / "ckpts" / "slat_flow_img_dit_L_64l8p2_fp16.safetensors"
    assert ckpt.stat().st_size > 1_000_000_000
    exe = d / "large.exe"
    r = run(BIN / "trellisc", model / "pipeline.json", "-o", exe)
    assert r.returncode == 0, r.stderr
    return d, exe


def inspect(exe, *args):
    return run(exe, "--inspect", *args)


def peaks(stdout):
    return {m[0]: int(m[1]) for m in re.findall(r"^memory form (\S+): peak (\d+) MiB", stdout, re.M)}


@pytest.mark.parametrize("budget", ["6G", "4G"])
def test_consumer_budgets_take_the_low_memory_form(large, budget):
    _, exe = large
    r = inspect(exe, "--memory-budget", budget)
    assert r.returncode == 0, r.stderr
    p = peaks(r.stdout)
    assert set(p) == {"default", "sequential-branches", "low-memory"}, r.stdout
    # The resident forms hold every stage; the low-memory form one at a time.
    assert p["default"] > p["sequential-branches"] > p["low-memory"]
    assert p["default"] > 6144 and p["low-memory"] <= 4096
    assert f"memory budget {int(budget[0]) * 1024} MiB: the low-memory form" in r.stdout


def test_a_large_budget_keeps_everything_resident(large):
    _, exe = large
    r = inspect(exe, "--memory-budget", "80G")
    assert r.returncode == 0, r.stderr
    assert "memory budget 81920 MiB: the default form" in r.stdout


def test_a_budget_no_form_fits_names_the_stage(large):
    _, exe = large
    r = inspect(exe, "--memory-budget", "2G")
    assert r.returncode == 1
    assert "the device memory budget of 2048 MiB is too small" in r.stderr, r.stderr
    # At the default bound (32768 voxels) the mesh decoder's arena is the largest stage.
    assert re.search(r"'decode_mesh' needs \d+ MiB \(weights \d+ MiB, arena \d+ MiB", r.stderr), r.stderr
    assert "planned for 32768 voxels" in r.stderr


def test_the_voxel_bound_changes_the_plan(large):
    """Fewer voxels: smaller sparse stages (the dense ss_stage is unchanged)."""
    _, exe = large
    small = peaks(inspect(exe, "--max-voxels", "20000").stdout)
    big = peaks(inspect(exe, "--max-voxels", "32768").stdout)
    assert small["low-memory"] < big["low-memory"]
    assert small["default"] < big["default"]


def test_the_planned_voxels_are_the_bench_scripts_surface(large, tmp_path):
    """--max-voxels N plans a surface-like set of N voxels: the same set
    bench/slat_gpu/make_coords.py writes, so the plan equals --coords'."""
    _, exe = large
    coords = tmp_path / "surface.npy"
    r = run(sys.executable, ROOT / "bench/slat_gpu/make_coords.py", "--voxels", "12345", "--out", coords)
    assert r.returncode == 0, r.stderr
    assert np.load(coords).shape == (12345, 4)
    by_bound = inspect(exe, "--max-voxels", "12345").stdout
    by_coords = inspect(exe, "--coords", coords).stdout
    forms = lambda s: s[s.index("memory form") :]
    assert forms(by_bound) == forms(by_coords)


def test_the_low_memory_option_is_honoured(large):
    _, exe = large
    r = inspect(exe, "--memory-budget", "80G", "--low-memory")
    assert r.returncode == 0, r.stderr
    assert "memory budget 81920 MiB: the low-memory form" in r.stdout


@pytest.mark.parametrize("bad", ["6X", "G", "-1G", "0"])
def test_a_malformed_budget_is_a_usage_error(large, bad):
    _, exe = large
    r = inspect(exe, "--memory-budget", bad)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "--memory-budget" in r.stderr and f"'{bad}'" in r.stderr, r.stderr
