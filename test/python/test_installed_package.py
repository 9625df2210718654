"""`pip install ./python` works offline (--no-build-isolation --no-index: setuptools and NumPy from
Debian) and the installed copy, not the source tree, imports, compiles and runs a program once
TRELLISC_BUILD_DIR names the build."""
import os
from pathlib import Path

from _tc_env import BUILD, run

SOURCE = Path(__file__).resolve().parents[2] / "python"

CHECK = """
import os
import sys

import numpy as np
import trellisc as tc

venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(tc.__file__)
assert where.startswith(venv + os.sep), f"trellisc imported from {where}, not from {venv}"
exe = tc.compile(lambda x: x * 2.0, args=[tc.InputInfo((2,))], target="cpu")
y = exe(np.ones(2, np.float32))
assert np.array_equal(y, [2.0, 2.0]), y
print("ok", where)
"""


def test_pip_install_offline(tmp_path):
    venv = tmp_path / "venv"
    r = run("/usr/bin/python3", "-m", "venv", "--system-site-packages", venv)
    assert r.returncode == 0, r.stderr
    # setuptools builds in the source tree (python/build, python/trellisc.egg-info) unless told to build
    # elsewhere: DIST_EXTRA_CONFIG names an extra setup.cfg-style file that setuptools reads.
    work = tmp_path / "setuptools-build"
    work.mkdir()
    (tmp_path / "setup.cfg").write_text(
        f"[build]\nbuild_base = {work / 'build'}\n[egg_info]\negg_base = {work}\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRELLISC_BUILD_DIR")}
    before = {p.name for p in SOURCE.iterdir()}
    r = run(
        venv / "bin/pip",
        "install",
        "--no-build-isolation",
        "--no-index",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--quiet",
        SOURCE,
        env={**env, "DIST_EXTRA_CONFIG": str(tmp_path / "setup.cfg")},
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    left = {"build", "trellisc.egg-info"} & ({p.name for p in SOURCE.iterdir()} - before)
    assert not left, f"the install left {sorted(left)} in {SOURCE}"

    # A clean directory, no PYTHONPATH: only the installed copy can be imported.
    r = run(
        venv / "bin/python",
        "-c",
        CHECK,
        venv,
        env={**env, "TRELLISC_BUILD_DIR": str(BUILD)},
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok "), r.stdout
