"""trellis-serve's API on the tiny preset (CPU reference): every endpoint, the event stream's order, the files
(the GLB through the Khronos validator), two jobs at once, the queue limit, cancel (queued and running), the
deadline, the bearer token, SIGTERM with a job running, and 1,000 malformed requests that each get a 4xx while
the server keeps serving."""
import base64
import http.client
import io
import json
import random
import shutil
import subprocess
import time

import numpy as np
import pytest

from _serve import SERVE, Server, cond_b64, tiny_program
from test_output_mesh import VALIDATE_JS, _validator

pytestmark = pytest.mark.skipif(not SERVE.exists(), reason=f"{SERVE} is not built")
FAST = {"ss": {"steps": 2}, "slat": {"steps": 2}}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_program(tmp_path_factory.mktemp("serve"))


@pytest.fixture(scope="module")
def server(tiny, tmp_path_factory):
    model, exe = tiny
    s = Server(model, exe, "--queue", "4", "--work", tmp_path_factory.mktemp("work"))
    yield s
    code, log = s.stop()
    assert code == 0, log


def test_health_and_metrics(server):
    assert server.json("GET", "/v1/health/live") == (200, {"status": "live"})
    assert server.json("GET", "/v1/health/ready") == (200, {"status": "ready"})
    status, headers, body = server.request("GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    text = body.decode()
    for name in ("trellis_serve_queue_depth", "trellis_serve_jobs_total", "trellis_serve_generation_seconds"):
        assert f"# TYPE {name} " in text, text


def test_a_job_streams_every_event_in_order_and_serves_its_files(server, tiny):
    model, _ = tiny
    job = server.submit({"cond": cond_b64(model), "seed": 3, **FAST})
    events = server.events(job)
    kinds = [k for k, _ in events]
    assert kinds[0] == "queued" and kinds[-1] == "done", kinds
    stages = [(d["stage"], d["phase"]) for k, d in events if k == "stage"]
    assert stages[:4] == [
        ("ss_stage", "begin"),
        ("ss_stage", "end"),
        ("slat_stage", "begin"),
        ("slat_stage", "end"),
    ], stages
    for stage in ("ss_stage", "slat_stage"):
        steps = [d["step"] for k, d in events if k == "step" and d["stage"] == stage]
        assert steps == [1, 2], (stage, steps)
    # The voxel count as soon as stage 1 has it: before stage 2 begins.
    coords = kinds.index("coords")
    assert coords < kinds.index("stage", kinds.index("step")) + 4
    voxels = next(d["voxels"] for k, d in events if k == "coords")
    state = server.wait(job)
    assert state["state"] == "done" and state["voxels"] == voxels
    done = events[-1][1]
    assert done["files"] == state["files"] and "mesh.glb" in done["files"] and done["seconds"] > 0
    status, headers, glb = server.request("GET", f"/v1/jobs/{job}/files/mesh.glb")
    assert status == 200 and headers["content-type"] == "model/gltf-binary" and glb[:4] == b"glTF"
    status, _, npy = server.request("GET", f"/v1/jobs/{job}/files/coords.npy")
    assert status == 200 and np.load(io.BytesIO(npy)).shape == (voxels, 4)
    # A late subscriber gets the whole log again.
    assert [k for k, _ in server.events(job)] == kinds


def test_the_glb_passes_the_khronos_validator(server, tiny, tmp_path):
    node, modules = _validator()
    model, _ = tiny
    job = server.submit({"cond": cond_b64(model), "formats": ["mesh"], **FAST})
    assert server.wait(job)["state"] == "done"
    _, _, glb = server.request("GET", f"/v1/jobs/{job}/files/mesh.glb")
    path = tmp_path / "mesh.glb"
    path.write_bytes(glb)
    out = subprocess.run([node, str(VALIDATE_JS), str(path), str(modules)], capture_output=True, text=True)
    report = json.loads(out.stdout)
    assert report["issues"]["numErrors"] == 0, report["issues"]["messages"]


def test_two_jobs_at_once_and_the_sync_form(server, tiny):
    model, _ = tiny
    a = server.submit({"cond": cond_b64(model), "seed": 1, "formats": ["gs"], **FAST})
    b = server.submit({"cond": cond_b64(model), "seed": 2, "formats": ["gs"], **FAST})
    ja, jb = server.wait(a), server.wait(b)
    assert ja["state"] == jb["state"] == "done"
    assert ja["files"] == jb["files"] and "gaussians.ply" in ja["files"] and "mesh.glb" not in ja["files"]
    pa = server.request("GET", f"/v1/jobs/{a}/files/gaussians.ply")[2]
    pb = server.request("GET", f"/v1/jobs/{b}/files/gaussians.ply")[2]
    assert pa != pb  # other seeds, other Gaussians
    status, headers, body = server.request(
        "POST", "/v1/infer?wait=1", {"cond": cond_b64(model), "formats": ["mesh"], **FAST}
    )
    assert status == 200 and headers["content-type"] == "model/gltf-binary" and body[:4] == b"glTF"


def test_cancel_a_running_and_a_queued_job(server, tiny):
    model, _ = tiny
    long = {"cond": cond_b64(model), "ss": {"steps": 500}, "slat": {"steps": 2}}
    running = server.submit(long)
    queued = server.submit(long)
    deadline = time.time() + 60
    while server.json("GET", f"/v1/jobs/{running}")[1]["state"] != "running" and time.time() < deadline:
        time.sleep(0.05)
    status, j = server.json("DELETE", f"/v1/jobs/{queued}")
    assert status == 202, j
    assert server.json("GET", f"/v1/jobs/{queued}")[1]["state"] == "cancelled"
    status, _ = server.json("DELETE", f"/v1/jobs/{running}")
    assert status == 202
    final = server.wait(running)
    assert final["state"] == "cancelled" and final["files"] == [], final
    events = server.events(running)
    assert events[-1] == ("failed", {"error": "cancelled", "state": "cancelled"}), events[-3:]
    steps = [d["step"] for k, d in events if k == "step"]
    assert 0 < len(steps) < 500  # stopped between steps
    assert server.json("DELETE", f"/v1/jobs/{running}")[0] == 409  # already ended
    assert server.json("DELETE", "/v1/jobs/0123456789abcdef")[0] == 404


def test_the_queue_limit_answers_429(tiny, tmp_path):
    model, exe = tiny
    s = Server(model, exe, "--queue", "1", "--work", tmp_path)
    try:
        long = {"cond": cond_b64(model), "ss": {"steps": 300}, "slat": {"steps": 2}}
        first = s.submit(long)  # runs
        while s.json("GET", f"/v1/jobs/{first}")[1]["state"] != "running":
            time.sleep(0.05)
        second = s.submit(long)  # waits: the queue is full
        status, headers, body = s.request("POST", "/v1/infer", long)
        assert status == 429 and headers["retry-after"] == "5", body
        assert "queue is full" in json.loads(body)["error"]
        metrics = s.request("GET", "/metrics")[2].decode()
        assert 'trellis_serve_requests_rejected_total{reason="queue_full"} 1' in metrics
        assert "trellis_serve_queue_depth 1" in metrics
        for job in (second, first):
            s.json("DELETE", f"/v1/jobs/{job}")
    finally:
        code, log = s.stop()
    assert code == 0, log


def test_the_deadline_fails_a_job(tiny, tmp_path):
    model, exe = tiny
    s = Server(model, exe, "--deadline", "8", "--work", tmp_path)
    try:
        job = s.submit({"cond": cond_b64(model), "ss": {"steps": 1000}})
        final = s.wait(job)
        assert final["state"] == "failed" and "deadline exceeded" in final["error"], final
        # The next job runs on the same engine.
        assert s.wait(s.submit({"cond": cond_b64(model), **FAST, "formats": ["gs"]}))["state"] == "done"
    finally:
        s.stop()


def test_the_token(tiny, tmp_path):
    model, exe = tiny
    (tmp_path / "token").write_text("s3cret-token\n")
    s = Server(model, exe, "--token-file", tmp_path / "token", "--work", tmp_path / "work")
    try:
        body = {"cond": cond_b64(model), "formats": ["gs"], **FAST}
        status, headers, data = s.request("POST", "/v1/infer", body)
        assert status == 401 and headers["www-authenticate"] == "Bearer", data
        assert s.request("POST", "/v1/infer", body, {"Authorization": "Bearer s3cret-tokeX"})[0] == 401
        assert s.request("GET", "/metrics")[0] == 401
        assert s.request("GET", "/v1/health/ready")[0] == 200  # probes need no token
        auth = {"Authorization": "Bearer s3cret-token"}
        # A refused POST leaves its connection usable: the next request on it is answered.
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        for headers, want in (({}, 401), (auth, 202)):
            c.request(
                "POST",
                "/v1/infer",
                body=json.dumps(body),
                headers={"Content-Type": "application/json", **headers},
            )
            r = c.getresponse()
            assert r.status == want, (r.status, r.read())
            r.read()
        c.close()
        job = s.submit(body, auth)
        assert [k for k, _ in s.events(job, query="?token=s3cret-token")][-1] == "done"
        assert s.wait(job, headers=auth)["state"] == "done"
    finally:
        s.stop()


def test_sigterm_finishes_the_running_job(tiny, tmp_path):
    model, exe = tiny
    work = tmp_path / "work"
    s = Server(model, exe, "--work", work)
    job = s.submit({"cond": cond_b64(model), "ss": {"steps": 40}, "slat": {"steps": 2}, "formats": ["gs"]})
    while s.json("GET", f"/v1/jobs/{job}")[1]["state"] != "running":
        time.sleep(0.05)
    code, log = s.stop()
    assert code == 0, log
    assert "SIGTERM: finishing the running jobs" in log and "stopped" in log
    assert (work / job / "gaussians.ply").is_file(), log  # it finished, its files are there


def malformed_requests(model, n=1000, seed=0):
    """(method, path, headers, body, why) of `n` malformed requests: truncated JSON, wrong types, bad base64,
    bad .npy, unknown fields, out-of-range numbers, huge bodies, wrong content types and routes."""
    rng = random.Random(seed)
    good = cond_b64(model)
    raw = (model / "cond.npy").read_bytes()
    arr = np.load(model / "cond.npy")

    def npy(a):
        b = io.BytesIO()
        np.save(b, a)
        return base64.b64encode(b.getvalue()).decode()

    nan = arr.copy()
    nan[0, 0, 0] = np.nan
    bad_conds = [
        npy(arr.astype(np.float64)),
        npy(arr.astype(np.int32)),
        npy(arr[:, :20]),
        npy(arr[0]),
        npy(np.zeros((2, 21, 128), np.float32)),
        npy(nan),
        base64.b64encode(raw[: len(raw) // 2]).decode(),
        base64.b64encode(raw[:9]).decode(),
        base64.b64encode(b"not a npy file at all").decode(),
        good[:-1],
        good[:-4] + "!!!!",
        " " + good,
        good.replace("A", "-", 1),
        "",
    ]
    wrong = [
        {"cond": 5},
        {"cond": None},
        {"cond": [good]},
        {"cond": {"data": good}},
        {"seed": 1},
        {"cond": good, "seed": "1"},
        {"cond": good, "seed": 1.5},
        {"cond": good, "seed": -1},
        {"cond": good, "seed": 2**70},
        {"cond": good, "formats": "mesh"},
        {"cond": good, "formats": []},
        {"cond": good, "formats": ["glb"]},
        {"cond": good, "formats": ["mesh", "mesh"]},
        {"cond": good, "formats": [1]},
        {"cond": good, "ss": 25},
        {"cond": good, "ss": {"steps": 0}},
        {"cond": good, "ss": {"steps": 10001}},
        {"cond": good, "ss": {"steps": "25"}},
        {"cond": good, "ss": {"steps": 2.5}},
        {"cond": good, "slat": {"cfg": -1}},
        {"cond": good, "slat": {"cfg": "high"}},
        {"cond": good, "slat": {"cfg": 1e9}},
        {"cond": good, "slat": {"step": 3}},
        {"cond": good, "sead": 3},
        [good],
        "cond",
        42,
    ]
    out = []
    for i in range(n):
        kind = i % 8
        if kind == 0:  # truncated JSON
            body = json.dumps({"cond": good, "seed": i, **FAST})
            out.append(
                ("POST", "/v1/infer", "application/json", body[: rng.randrange(1, len(body) - 1)], "trunc")
            )
        elif kind == 1:
            out.append(
                ("POST", "/v1/infer", "application/json", json.dumps({"cond": rng.choice(bad_conds)}), "cond")
            )
        elif kind == 2:
            out.append(("POST", "/v1/infer", "application/json", json.dumps(rng.choice(wrong)), "types"))
        elif kind == 3:  # random bytes
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
            out.append(("POST", "/v1/infer", "application/json", body, "bytes"))
        elif kind == 4:  # over --max-body (64 KiB here)
            out.append(("POST", "/v1/infer", "application/json", "{" + " " * (70 << 10) + "}", "huge"))
        elif kind == 5:
            ctype = rng.choice(["text/plain", "application/octet-stream", "multipart/form-data; boundary=x"])
            out.append(("POST", "/v1/infer", ctype, json.dumps({"cond": good}), "ctype"))
        elif kind == 6:
            path = rng.choice(
                ["/v1/jobs/zz", "/v1/jobs/0123456789abcdef", "/v1/nothing", "/v1/jobs/abc/files/x"]
            )
            out.append((rng.choice(["GET", "DELETE"]), path, None, None, "route"))
        else:  # well-formed JSON, wrong nesting / huge numbers
            body = json.dumps({"cond": good, "ss": {"steps": 10 ** rng.randrange(5, 30)}})
            out.append(("POST", "/v1/infer", "application/json", body, "range"))
    return out


def test_a_thousand_malformed_requests_get_4xx_and_the_server_keeps_serving(tiny, tmp_path):
    model, exe = tiny
    s = Server(model, exe, "--max-body", 65536, "--work", tmp_path)
    try:
        counts = {}
        for method, path, ctype, body, why in malformed_requests(model):
            headers = {"Content-Type": ctype} if ctype else {}
            status, h, data = s.request(method, path, body, headers)
            assert 400 <= status < 500, (why, status, data[:200])
            err = json.loads(data)
            assert isinstance(err["error"], str) and err["error"], (why, err)
            counts[status] = counts.get(status, 0) + 1
        print("statuses:", dict(sorted(counts.items())))
        assert s.json("GET", "/v1/health/ready")[0] == 200
        assert s.wait(s.submit({"cond": cond_b64(model), "formats": ["gs"], **FAST}))["state"] == "done"
    finally:
        code, log = s.stop()
    assert code == 0, log


@pytest.mark.parametrize(
    "body, status, field, words",
    [
        ({"seed": 1}, 400, "cond", "is required"),
        ({"cond": "@@@@"}, 400, "cond", "not valid base64"),
        ({"cond": None}, 400, "cond", "expected a string"),
        ({"ss": {"steps": 0}, "cond": "GOOD"}, 400, "ss.steps", "expected an integer in 1..10000, found 0"),
        (
            {"cond": "GOOD", "formats": ["glb"]},
            400,
            "formats[0]",
            'expected "gs", "rf" or "mesh", found "glb"',
        ),
        ({"cond": "GOOD", "sead": 1}, 400, "sead", "unknown field"),
        ({"cond": "AAAA"}, 422, "cond", "too short for a .npy header"),
    ],
)
def test_bad_requests_name_the_field(server, tiny, body, status, field, words):
    body = {k: cond_b64(tiny[0]) if v == "GOOD" else v for k, v in body.items()}
    got, err = server.json("POST", "/v1/infer", body)
    assert got == status and err.get("field") == field and words in err["error"], err


def test_a_wrong_shape_names_what_the_program_expects(server, tiny):
    model, _ = tiny
    b = io.BytesIO()
    np.save(b, np.zeros((1, 20, 128), np.float32))
    status, err = server.json("POST", "/v1/infer", {"cond": base64.b64encode(b.getvalue()).decode()})
    assert status == 422 and err["field"] == "cond", err
    assert "[1, 20, 128]" in err["error"] and "21" in err["error"], err


def test_unknown_routes_and_files(server):
    status, err = server.json("GET", "/v1/nothing")
    assert status == 404 and "no route" in err["error"]
    status, err = server.json("GET", "/v1/jobs/0123456789abcdef/files/mesh.glb")
    assert status == 404 and "no job" in err["error"]


def test_a_malformed_memory_budget_stops_the_server_at_once(tiny):
    """--memory-budget / --max-voxels (the engines' memory plan, as trellis.exe's) are checked before anything
    starts: a usage error naming the option, exit 2."""
    model, program = tiny
    for args, words in (
        (["--memory-budget", "6X"], "--memory-budget"),
        (["--max-voxels", "0"], "--max-voxels"),
    ):
        r = subprocess.run(
            [str(SERVE), str(program), "--model", str(model), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert words in r.stderr, r.stderr
