"""Points the trellisc Python package at the build under test."""
import os
from pathlib import Path

BUILD = Path(os.environ.get("TRELLIS_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
os.environ["TRELLISC_BUILD_DIR"] = str(BUILD)  # the build under test


def run(*args, **kw):
    """A command (paths allowed), its output captured as text."""
    import subprocess

    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)


def tiny_cpu_program(d):
    """The tiny preset (seed 1) in d/model and its CPU trellis.exe (21 cond
    tokens) at d/trellis.exe: (model, exe)."""
    model, exe = d / "model", d / "trellis.exe"
    r = run(BUILD / "bin/trellis-mkmodel", "--preset", "tiny", "--seed", "1", "--out", model, "--quiet")
    assert r.returncode == 0, r.stderr
    r = run(BUILD / "bin/trellisc", model / "pipeline.json", "--target=cpu", "--cond-tokens", "21", "-o", exe)
    assert r.returncode == 0, r.stderr
    return model, exe
