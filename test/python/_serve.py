"""A trellis-serve process for the tests: the tiny preset compiled for the CPU reference, the server on a free
loopback port, and small HTTP helpers (stdlib only)."""
import base64
import http.client
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from _tc_env import BUILD, run

SERVE = BUILD / "bin" / "trellis-serve"


def tiny_program(d: Path):
    """(model dir, CPU program): the tiny preset (seed 1) and its trellis.exe for 21 conditioning tokens."""
    model, exe = d / "model", d / "tiny.exe"
    if not exe.exists():
        r = run(BUILD / "bin/trellis-mkmodel", "--preset", "tiny", "--seed", "1", "--out", model, "--quiet")
        assert r.returncode == 0, r.stderr
        r = run(
            BUILD / "bin/trellisc", model / "pipeline.json", "--target=cpu", "--cond-tokens", "21", "-o", exe
        )
        assert r.returncode == 0, r.stderr
    return model, exe


def cond_b64(model: Path) -> str:
    return base64.b64encode((model / "cond.npy").read_bytes()).decode()


class Server:
    """trellis-serve PROGRAM --model DIR --listen 127.0.0.1:0 [args]; stop() sends SIGTERM and returns the exit
    status and stderr."""

    def __init__(self, model, program, *args, env=None):
        self.proc = subprocess.Popen(
            [str(SERVE), str(program), "--model", str(model), "--listen", "127.0.0.1:0", *map(str, args)],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.log = []
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
                break
        assert self.port, "".join(self.log)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, headers dict, body bytes)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            headers = {"Content-Type": "application/json", **(headers or {})}
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def json(self, method, path, body=None, headers=None):
        status, _, data = self.request(method, path, body, headers)
        return status, json.loads(data)

    def submit(self, body, headers=None):
        status, j = self.json("POST", "/v1/infer", body, headers)
        assert status == 202, (status, j)
        return j["id"]

    def wait(self, job_id, timeout=120, headers=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            status, j = self.json("GET", f"/v1/jobs/{job_id}", headers=headers)
            assert status == 200, j
            if j["state"] not in ("queued", "running"):
                return j
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} did not finish in {timeout} s")

    def events(self, job_id, timeout=120, query=""):
        """The job's server-sent events as (type, data) until the stream ends."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.request("GET", f"/v1/jobs/{job_id}/events{query}")
        r = c.getresponse()
        assert r.status == 200, r.read()
        assert r.getheader("Content-Type").startswith("text/event-stream")
        out, kind = [], None
        for raw in r:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                out.append((kind, json.loads(line[6:])))
        c.close()
        return out

    def stop(self, timeout=120):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, "".join(self.log) + (err or "")
