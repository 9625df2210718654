"""trellis-serve's web page in a real browser.

The tiny preset's CPU program behind trellis-serve; headless Chromium (Debian's
chromium, driven by puppeteer-core through serve_browser_check.js, both from
scripts/install-deps.sh --test) opens the page, submits the tiny cond.npy, waits
for the job's done state and for both viewers (model-viewer with mesh.glb, the
splat viewer with gaussians.ply) to draw, on software WebGL (SwiftShader). The
viewers' screenshot is kept as serve_page.png in $TRELLIS_TEST_RESULTS (default
<build>/test-results).

Without chromium, node or the npm packages the test is skipped, except in CI
(CI=true), where it fails.
"""
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from _serve import SERVE, Server, tiny_program
from _tc_env import BUILD

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CHECK_JS = HERE / "serve_browser_check.js"
WEB_ROOT = BUILD / "share" / "trellis-serve" / "web"  # trellis-serve's default
NODE_MODULES = Path(os.environ.get("TRELLIS_WEB_NODE_MODULES", REPO / "build-deps" / "web" / "node_modules"))
CHROMIUM = Path(os.environ.get("TRELLIS_CHROMIUM", "/usr/bin/chromium"))
TIMEOUT_S = 120  # the browser run, from page load to the last screenshot


def _unavailable(reason):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: scripts/install-deps.sh --test provides it)")
    pytest.skip(reason)


def test_the_page_generates_and_shows_the_results(tmp_path):
    assert SERVE.is_file(), f"{SERVE} is not built (ninja trellis-serve)"
    node = shutil.which("node")
    if not node:
        _unavailable("node is not installed")
    if not CHROMIUM.is_file():
        _unavailable(f"{CHROMIUM} is not installed (Debian's chromium package)")
    if not (NODE_MODULES / "puppeteer-core" / "package.json").is_file():
        _unavailable(f"puppeteer-core is not installed in {NODE_MODULES}; run scripts/install-deps.sh --test")
    if not (WEB_ROOT / "index.html").is_file():
        _unavailable(
            f"the page is not built in {WEB_ROOT}; run scripts/install-deps.sh, then ninja trellis-serve-web"
        )

    model, exe = tiny_program(tmp_path)
    results = Path(os.environ.get("TRELLIS_TEST_RESULTS", BUILD / "test-results"))
    screenshot = results / "serve_page.png"
    screenshot.unlink(missing_ok=True)
    server = Server(model, exe, "--work", tmp_path / "work")
    try:
        # Its own process group: on a timeout, Chromium goes with node.
        proc = subprocess.Popen(
            [node, CHECK_JS, f"http://127.0.0.1:{server.port}/", model / "cond.npy", screenshot],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={
                **os.environ,
                "TRELLIS_CHROMIUM": str(CHROMIUM),
                "TRELLIS_WEB_NODE_MODULES": str(NODE_MODULES),
                "TRELLIS_BROWSER_TIMEOUT_S": str(TIMEOUT_S - 20),
            },
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"the browser check ran past {TIMEOUT_S} s\n{out}\n{err}")
    finally:
        status, log = server.stop()
    assert status == 0, log

    try:
        report = json.loads(out)
    except json.JSONDecodeError:
        pytest.fail(f"serve_browser_check.js exited {proc.returncode} without a report\n{out}\n{err}")
    if proc.returncode == 2:
        _unavailable(f"the browser could not run: {report.get('error')}\n{err}")
    print(json.dumps(report.get("seconds"), indent=2))  # with -s: where the time went
    assert proc.returncode == 0, f"{report.get('error')}\n{json.dumps(report, indent=2)}\n{err}"
    assert screenshot.is_file()
