#!/usr/bin/env python3
"""Load test of trellis-serve (docs/guide/serve.md): N concurrent clients on loopback, each submitting the
cond file and following its job to the end, then throughput, latency and queue behaviour. Standard library
only.

  load.py --url http://127.0.0.1:8080 --cond /tmp/tiny/cond.npy [--clients 4] [--jobs 16] [--timeout 600]
  load.py --start /tmp/tiny.exe --model /tmp/tiny [--server build/bin/trellis-serve] [--server-args "..."]
  load.py --start PROGRAM --model DIR --exe-runs 4       # + the same generations as one PROGRAM process each

Each client thread takes the next job number until --jobs are taken or --timeout has passed, POSTs
/v1/infer (seed = --seed + job number; on 429 it waits Retry-After and tries again, counting the 429s),
follows the job by its event stream (--follow events, the default) or by polling GET /v1/jobs/{id} (--follow
poll), then GETs the job once more and fetches its GLB (--no-fetch skips that). A sampler thread reads
/metrics every --metrics-interval seconds for the queue depth; the server's counters and histograms are read
before and after, and their differences reported (so a long-running server's history does not count).

Reported: generations per hour (jobs done / the wall from the first submit to the last done), per device
(--devices, default the number of device labels in trellis_serve_device_memory_bytes, at least 1), latency
submit -> done (p50 / p99 / max, the submit being the accepted POST), queue wait (submit -> the first stage
begins), the 429s, the deepest queue seen, the server's mean generation and stage times over the run.
With --start: the server's start to ready (its engines' setup), and after SIGTERM its exit status and time.
With --exe-runs N: N generations of PROGRAM --model DIR --cond COND --seed S --out TMP, one process each (one
at a time per device; --gpu-device i when there are several), the same formats and sampler settings: what a
process per request gives, engine setup paid every time. --warmup N: N jobs first (and one process before the
--exe-runs), not counted: an engine's first run tunes its GEMMs.

Exit status: 0 all jobs done; 1 a job failed or was cancelled, a request failed, a GLB was not glTF, the
--exe-runs processes failed, or the server (--start) did not become ready or exited non-zero after SIGTERM;
3 no failure, but not every job (or --exe-runs process) finished before --timeout, which bounds everything:
the server's start, the warm-up, the load and the processes (jobs left are cancelled); 2 usage.
"""
import argparse
import base64
import http.client
import json
import os
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


class HttpError(Exception):
    def __init__(self, status, body, headers=None):
        self.status, self.body, self.headers = status, body, headers or {}
        super().__init__(f"HTTP {status}: {body[:300]!r}")


class Client:
    """One client's connection (kept alive for GETs; a POST or a stream gets its own)."""

    def __init__(self, url, token=None, timeout=60.0):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http":
            raise SystemExit(f"load.py: only http:// URLs ({url})")
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.base = u.path.rstrip("/")
        self.token, self.timeout = token, timeout
        self.conn = None

    def headers(self, extra=None):
        h = {"Accept": "*/*"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(extra or {})
        return h

    def close(self):
        """Drops the kept-alive connection (the server holds a thread for each open one)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def connect(self, timeout=None):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)

    def request(self, method, path, body=None, headers=None, fresh=False):
        """(status, lower-cased headers, body bytes). GETs retry once on a dropped keep-alive connection."""
        for attempt in (0, 1):
            conn = self.connect() if fresh else (self.conn or self.connect())
            try:
                conn.request(method, self.base + path, body=body, headers=self.headers(headers))
                r = conn.getresponse()
                data = r.read()
                hdrs = {k.lower(): v for k, v in r.getheaders()}
                if fresh or r.will_close:
                    conn.close()
                    if not fresh:
                        self.conn = None
                else:
                    self.conn = conn
                return r.status, hdrs, data
            except (
                http.client.RemoteDisconnected,
                ConnectionResetError,
                BrokenPipeError,
                http.client.CannotSendRequest,
                http.client.ResponseNotReady,
            ):
                conn.close()
                if not fresh:
                    self.conn = None
                if method != "GET" or attempt == 1:
                    raise

    def get_json(self, path):
        status, hdrs, data = self.request("GET", path)
        if status != 200:
            raise HttpError(status, data.decode(errors="replace"), hdrs)
        return json.loads(data)

    def events(self, path, deadline):
        """Yields (event, data dict) of a Server-Sent Events stream until it ends or the deadline passes."""
        conn = self.connect(timeout=max(1.0, deadline - time.monotonic()))
        try:
            conn.request("GET", self.base + path, headers=self.headers({"Accept": "text/event-stream"}))
            r = conn.getresponse()
            if r.status != 200:
                raise HttpError(r.status, r.read().decode(errors="replace"))
            event, data = "message", []
            while True:
                raw = r.readline()
                if not raw:
                    return
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if line == "":
                    if data:
                        text = "\n".join(data)
                        try:
                            payload = json.loads(text)
                        except ValueError:
                            payload = {"text": text}
                        yield event, payload
                    event, data = "message", []
                elif line.startswith(":"):
                    continue  # a comment (keep-alive)
                else:
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "event":
                        event = value
                    elif field == "data":
                        data.append(value)
        finally:
            conn.close()


# ---- /metrics ----------------------------------------------------------------------------------------------

METRIC_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """{(name, ((label, value), ...)): float} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = METRIC_LINE.match(line)
        if not m:
            continue
        labels = tuple(sorted(LABEL.findall(m.group(3) or "")))
        try:
            out[(m.group(1), labels)] = float(m.group(4))
        except ValueError:
            pass
    return out


def metric(ms, name, **labels):
    want = set(labels.items())
    vals = [v for (n, ls), v in ms.items() if n == name and want <= set(ls)]
    return sum(vals) if vals else None


def label_values(ms, name, label):
    return sorted({dict(ls).get(label) for (n, ls) in ms if n == name and dict(ls).get(label) is not None})


class MetricsSampler(threading.Thread):
    """Reads /metrics every interval: the deepest trellis_serve_queue_depth seen."""

    def __init__(self, url, token, interval):
        super().__init__(daemon=True)
        self.client, self.interval = Client(url, token, timeout=10), interval
        self.stop = threading.Event()
        self.max_depth, self.samples, self.errors = 0.0, 0, 0

    def run(self):
        while not self.stop.is_set():
            try:
                status, _, data = self.client.request("GET", "/metrics")
                if status == 200:
                    d = metric(parse_metrics(data.decode(errors="replace")), "trellis_serve_queue_depth")
                    if d is not None:
                        self.max_depth = max(self.max_depth, d)
                        self.samples += 1
                else:
                    self.errors += 1
            except (OSError, http.client.HTTPException):
                self.errors += 1
            self.stop.wait(self.interval)


def read_metrics(client):
    try:
        status, _, data = client.request("GET", "/metrics")
        return parse_metrics(data.decode(errors="replace")) if status == 200 else {}
    except (OSError, http.client.HTTPException):
        return {}


# ---- one job -----------------------------------------------------------------------------------------------


class Job:
    def __init__(self, n, seed):
        self.n, self.seed = n, seed
        self.id = None
        self.state = "unsubmitted"
        self.error = None
        self.first_try = self.submitted = self.started = self.done_at = None
        self.rejected = 0  # 429s before it was accepted
        self.voxels = None
        self.server_seconds = None  # the done event's seconds
        self.files = []
        self.glb_bytes = None
        self.steps_seen = 0


def follow_events(client, job, deadline):
    for event, data in client.events(f"/v1/jobs/{job.id}/events", deadline):
        if event == "queued":
            job.state = "queued"
        elif event == "stage":
            if job.started is None and data.get("phase", "begin") == "begin":
                job.started = time.monotonic()
            job.state = "running"
        elif event == "step":
            job.steps_seen += 1
        elif event == "coords":
            job.voxels = data.get("voxels", job.voxels)
        elif event == "done":
            job.done_at = time.monotonic()
            job.state = "done"
            job.server_seconds = data.get("seconds")
            job.files = data.get("files", job.files)
            return True
        elif event == "failed":
            job.done_at = time.monotonic()
            job.state = data.get("state", "failed")
            job.error = data.get("error")
            return True
        if time.monotonic() > deadline:
            return False
    return False  # the stream ended without an end event: poll for the state


def follow_poll(client, job, deadline, interval):
    while time.monotonic() < deadline:
        st = client.get_json(f"/v1/jobs/{job.id}")
        state = st.get("state")
        if state == "running" and job.started is None:
            job.started = time.monotonic()
        if state in ("done", "failed", "cancelled"):
            job.done_at = time.monotonic()
            job.state, job.error = state, st.get("error")
            job.files = st.get("files", job.files)
            job.voxels = st.get("voxels", job.voxels)
            return True
        job.state = state or job.state
        time.sleep(interval)
    return False


def run_job(args, client, body, job, deadline):
    # Submit; a full queue (429) is waited out as Retry-After says, within the deadline.
    job.first_try = time.monotonic()
    while True:
        t0 = time.monotonic()
        status, hdrs, data = client.request(
            "POST", "/v1/infer", body=body, headers={"Content-Type": "application/json"}, fresh=True
        )
        if status == 202:
            job.submitted = t0
            job.id = json.loads(data)["id"]
            job.state = "queued"
            break
        if status == 429:
            job.rejected += 1
            try:
                wait = float(hdrs.get("retry-after", "1"))
            except ValueError:
                wait = 1.0
            wait = min(max(wait, 0.05), args.max_backoff)
            if time.monotonic() + wait > deadline:
                job.state, job.error = "unsubmitted", "the queue stayed full until the timeout"
                return
            time.sleep(wait)
            continue
        job.state, job.error = (
            "rejected",
            f"POST /v1/infer: HTTP {status}: {data[:300].decode(errors='replace')}",
        )
        return
    ended = False
    if args.follow == "events":
        client.close()  # while the stream is open, no idle connection besides it
        try:
            ended = follow_events(client, job, deadline)
        except (OSError, http.client.HTTPException, HttpError) as e:
            if time.monotonic() >= deadline:
                ended = False
            else:
                print(f"load.py: job {job.id}: event stream: {e}; polling instead", file=sys.stderr)
    if not ended:
        ended = follow_poll(client, job, deadline, args.poll)
    if not ended:
        job.state = "unfinished"
        return
    if job.state != "done":
        return
    # The job's status once more (voxels, files), then its GLB.
    st = client.get_json(f"/v1/jobs/{job.id}")
    job.voxels = st.get("voxels", job.voxels)
    job.files = st.get("files", job.files)
    if st.get("state") != "done":
        job.state, job.error = "inconsistent", f"done event, but GET says {st.get('state')}"
        return
    if args.fetch:
        glbs = [f for f in job.files if str(f).endswith(".glb")]
        if not glbs:
            if "mesh" in args.formats:
                job.state, job.error = "bad-files", f"no .glb among {job.files}"
            return
        status, _, data = client.request("GET", f"/v1/jobs/{job.id}/files/{urllib.parse.quote(glbs[0])}")
        if status != 200 or data[:4] != b"glTF":
            job.state = "bad-files"
            job.error = f"GET files/{glbs[0]}: HTTP {status}, {len(data)} bytes, starts {data[:4]!r}"
            return
        job.glb_bytes = len(data)


def warmup(args, url, request):
    """--warmup jobs submitted at once (one per free engine) and waited for, not counted: each engine's first
    run tunes its GEMMs and binds its first voxel set. Returns their wall time."""
    t0 = time.monotonic()
    deadline = args.hard_deadline
    jobs = [Job(-1 - n, args.seed + 100000 + n) for n in range(args.warmup)]
    threads = []
    for job in jobs:
        body = json.dumps(dict(request, seed=job.seed)).encode()
        t = threading.Thread(
            target=run_job, args=(args, Client(url, args.token), body, job, deadline), daemon=True
        )
        t.start()
        threads.append(t)
        time.sleep(0.05)  # submission order = engine order
    for t in threads:
        t.join()
    bad = [j for j in jobs if j.state != "done"]
    if bad:
        raise SystemExit(f"load.py: warm-up job {bad[0].id}: {bad[0].state}: {bad[0].error}")
    wall = time.monotonic() - t0
    print(f"load.py: {len(jobs)} warm-up job(s) done in {wall:.2f} s", flush=True)
    return wall


# ---- the server (--start) ----------------------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args):
    port = args.port or free_port()
    cmd = [args.server, args.start, "--model", args.model, "--listen", f"127.0.0.1:{port}"]
    if args.token_file:
        cmd += ["--token-file", args.token_file]
    cmd += shlex.split(args.server_args or "")
    log_path = args.server_log or os.path.join(tempfile.mkdtemp(prefix="trellis-serve-load-"), "server.log")
    log = open(log_path, "wb")
    print(f"load.py: starting {' '.join(shlex.quote(c) for c in cmd)} (log {log_path})", flush=True)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    client = Client(url, args.token, timeout=5)
    while True:
        if proc.poll() is not None:
            log.close()
            tail(log_path)
            raise SystemExit(f"load.py: the server exited with status {proc.returncode} before it was ready")
        try:
            status, _, _ = client.request("GET", "/v1/health/ready")
            if status == 200:
                break
        except (OSError, http.client.HTTPException):
            pass
        if time.monotonic() - t0 > args.ready_timeout or time.monotonic() > args.hard_deadline:
            proc.send_signal(signal.SIGTERM)
            log.close()
            tail(log_path)
            raise SystemExit(f"load.py: the server was not ready after {time.monotonic() - t0:.0f} s")
        time.sleep(0.05)
    ready_s = time.monotonic() - t0
    print(f"load.py: server ready after {ready_s:.2f} s at {url}", flush=True)
    return proc, url, ready_s, log, log_path


def stop_server(proc, log, grace):
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
        rc = f"killed after {grace} s (SIGTERM ignored)"
    log.close()
    return rc, time.monotonic() - t0


def tail(path, n=20):
    try:
        lines = Path(path).read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return
    for line in lines:
        print(f"  server| {line}", file=sys.stderr)


# ---- a process per generation (--exe-runs) -----------------------------------------------------------------


def exe_runs(args, devices):
    """args.exe_runs generations of PROGRAM, one process each, one at a time per device."""
    work = tempfile.mkdtemp(prefix="trellis-serve-exe-")
    walls, failures = [], []
    lock = threading.Lock()
    counter = iter(range(args.exe_runs))

    def command(n, dev):
        cmd = [
            args.start,
            "--model",
            args.model,
            "--cond",
            args.cond,
            "--seed",
            str(args.seed + n),
            "--out",
            os.path.join(work, f"g{n}"),
            "--formats",
            ",".join(args.formats),
        ]
        if devices > 1:
            cmd += ["--gpu-device", str(dev)]
        for flag, v in (
            ("--steps-ss", args.steps_ss),
            ("--cfg-ss", args.cfg_ss),
            ("--steps-slat", args.steps_slat),
            ("--cfg-slat", args.cfg_slat),
        ):
            if v is not None:
                cmd += [flag, str(v)]
        return cmd

    if args.warmup:
        # One process first, not timed: it fills trellis.exe's GEMM tuning cache ($TRELLIS_CACHE_DIR, else
        # ~/.cache/trellis) that the timed ones then read, as a deployment's processes would.
        try:
            r = subprocess.run(
                command(100000, 0),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=max(1.0, args.hard_deadline - time.monotonic()),
            )
        except subprocess.TimeoutExpired:
            return walls, failures, 0.0
        if r.returncode != 0:
            failures.append(
                f"warm-up process: status {r.returncode}: " + r.stdout.decode(errors="replace")[-500:]
            )
            return walls, failures, 0.0

    def worker(dev):
        while True:
            with lock:
                n = next(counter, None)
            if n is None or time.monotonic() >= args.hard_deadline:
                return
            cmd = command(n, dev)
            t0 = time.monotonic()
            try:
                r = subprocess.run(
                    cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=args.hard_deadline - t0
                )
            except subprocess.TimeoutExpired:
                return  # out of time: counted as not run
            wall = time.monotonic() - t0
            with lock:
                if r.returncode == 0:
                    walls.append(wall)
                else:
                    failures.append(
                        f"{' '.join(cmd)}: status {r.returncode}: " + r.stdout.decode(errors="replace")[-500:]
                    )

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(d,)) for d in range(devices)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    span = time.monotonic() - t0
    subprocess.run(["rm", "-rf", work])
    return walls, failures, span


# ---- report ------------------------------------------------------------------------------------------------


def pct(values, p):
    """The p-th percentile, linear between the closest ranks (numpy's default)."""
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def fmt(x, unit="s", digits=2):
    return "—" if x is None else f"{x:.{digits}f} {unit}".rstrip()


def histogram_means(before, after, name, label):
    """{label value: (mean seconds, count)} of a histogram's _sum/_count over the run."""
    out = {}
    for value in label_values(after, f"{name}_count", label) if label else [None]:
        kw = {label: value} if label else {}
        c = (metric(after, f"{name}_count", **kw) or 0) - (metric(before, f"{name}_count", **kw) or 0)
        s = (metric(after, f"{name}_sum", **kw) or 0) - (metric(before, f"{name}_sum", **kw) or 0)
        if c > 0:
            out[value] = (s / c, int(c))
    return out


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = ap.add_argument_group("the server")
    where.add_argument("--url", help="a running server (default http://127.0.0.1:8080 without --start)")
    where.add_argument(
        "--start",
        metavar="PROGRAM",
        help="start trellis-serve PROGRAM --model DIR on a free "
        "loopback port, stop it with SIGTERM at the end",
    )
    where.add_argument(
        "--model", help="the model directory (--start, --exe-runs; its cond.npy is the default --cond)"
    )
    where.add_argument(
        "--server", default=str(ROOT / "build/bin/trellis-serve"), help="the trellis-serve binary"
    )
    where.add_argument(
        "--server-args", default="", help='more trellis-serve options, e.g. "--queue 4 --devices 0"'
    )
    where.add_argument("--port", type=int, default=0, help="--start's port (default a free one)")
    where.add_argument("--server-log", help="--start's log file (default a temporary file)")
    where.add_argument("--ready-timeout", type=float, default=600, help="seconds for the server to be ready")
    where.add_argument("--term-timeout", type=float, default=120, help="seconds for it to exit after SIGTERM")
    where.add_argument("--token-file", help="the bearer token (given to --start's server too)")
    load = ap.add_argument_group("the load")
    load.add_argument("--cond", help="the .npy cond file sent with every job (default MODEL/cond.npy)")
    load.add_argument("--clients", type=int, default=4, help="concurrent clients (threads), default 4")
    load.add_argument("--jobs", type=int, default=16, help="jobs in all, default 16")
    load.add_argument(
        "--timeout",
        type=float,
        default=600,
        help="seconds for everything (server start, warm-up, load, --exe-runs), default 600",
    )
    load.add_argument(
        "--warmup",
        type=int,
        default=0,
        metavar="N",
        help="N jobs first, at once, not counted (one per engine: its first run tunes GEMMs)",
    )
    load.add_argument("--seed", type=int, default=1, help="job n gets seed SEED + n (default 1)")
    load.add_argument("--formats", default="gs,rf,mesh", help="the formats asked for (default gs,rf,mesh)")
    load.add_argument("--steps-ss", type=int)
    load.add_argument("--cfg-ss", type=float)
    load.add_argument("--steps-slat", type=int)
    load.add_argument("--cfg-slat", type=float)
    load.add_argument(
        "--follow",
        choices=("events", "poll"),
        default="events",
        help="follow a job by its event stream (default) or by polling its status",
    )
    load.add_argument("--poll", type=float, default=0.1, help="seconds between polls (default 0.1)")
    load.add_argument("--no-fetch", dest="fetch", action="store_false", help="do not fetch the GLBs")
    load.add_argument("--max-backoff", type=float, default=10, help="the most seconds waited after a 429")
    load.add_argument("--metrics-interval", type=float, default=0.25, help="seconds between /metrics reads")
    load.add_argument(
        "--devices", type=int, help="devices to divide the throughput by (default from /metrics)"
    )
    load.add_argument(
        "--exe-runs",
        type=int,
        default=0,
        metavar="N",
        help="after the load: N generations as one PROGRAM process each (needs --start, --model)",
    )
    load.add_argument("--label", default="", help="a name for this run in the JSON")
    load.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    args.formats = [f for f in args.formats.split(",") if f]
    if args.url and args.start:
        ap.error("--url or --start, not both")
    if args.start and not args.model:
        ap.error("--start needs --model")
    if args.exe_runs and not args.start:
        ap.error("--exe-runs needs --start PROGRAM and --model")
    if not args.cond:
        if not args.model:
            ap.error("--cond (or --model, whose cond.npy is taken)")
        args.cond = os.path.join(args.model, "cond.npy")
    if args.clients < 1 or args.jobs < 1 or args.timeout <= 0:
        ap.error("--clients and --jobs at least 1, --timeout positive")
    args.token = Path(args.token_file).read_text().splitlines()[0].strip() if args.token_file else None
    # --timeout bounds all of it: the server's start, the warm-up, the load, the --exe-runs processes.
    args.hard_deadline = time.monotonic() + args.timeout

    request = {
        "cond": base64.b64encode(Path(args.cond).read_bytes()).decode("ascii"),
        "formats": args.formats,
    }
    if args.seed is not None:
        request["seed"] = args.seed
    for stage in ("ss", "slat"):
        s = {
            k: v
            for k, v in (("steps", getattr(args, f"steps_{stage}")), ("cfg", getattr(args, f"cfg_{stage}")))
            if v is not None
        }
        if s:
            request[stage] = s

    proc = log = None
    ready_s = warm_s = None
    status = 0
    if args.start:
        proc, url, ready_s, log, log_path = start_server(args)
    else:
        url = args.url or "http://127.0.0.1:8080"
    try:
        control = Client(url, args.token, timeout=30)
        warm_s = warmup(args, url, request) if args.warmup else None
        before = read_metrics(control)
        sampler = MetricsSampler(url, args.token, args.metrics_interval)
        sampler.start()

        jobs = [Job(n, args.seed + n) for n in range(args.jobs)]
        lock = threading.Lock()
        taken = [0]
        t_start = time.monotonic()
        deadline = args.hard_deadline

        def client_thread():
            client = Client(url, args.token, timeout=60)
            while True:
                with lock:
                    if taken[0] >= len(jobs) or time.monotonic() >= deadline:
                        return
                    job = jobs[taken[0]]
                    taken[0] += 1
                body = dict(request, seed=job.seed)
                try:
                    run_job(args, client, json.dumps(body).encode(), job, deadline)
                except Exception as e:  # noqa: BLE001 - one job's failure is reported, the others go on
                    job.state, job.error = "error", f"{type(e).__name__}: {e}"
                if job.state not in ("done", "unfinished", "unsubmitted"):
                    print(f"load.py: job {job.n} ({job.id}): {job.state}: {job.error}", file=sys.stderr)

        threads = [threading.Thread(target=client_thread, daemon=True) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()) + 30)
        t_end = time.monotonic()
        sampler.stop.set()
        sampler.join(5)

        # Jobs left behind by the timeout: cancelled, so that the server does not go on with them.
        unfinished = [
            j
            for j in jobs
            if j.id and j.state not in ("done", "failed", "cancelled", "bad-files", "inconsistent")
        ]
        for j in unfinished:
            try:
                control.request("DELETE", f"/v1/jobs/{j.id}")
            except (OSError, http.client.HTTPException):
                pass
        after = read_metrics(control)
        # The devices: those that have run a job (a device's memory gauge appears after its first run).
        devices = args.devices or max(
            1, len(label_values(after, "trellis_serve_device_memory_bytes", "device"))
        )
        control.close()  # no idle connection left for the server to wait out at SIGTERM
        sampler.client.close()
    finally:
        term = None
        if proc is not None:
            term = stop_server(proc, log, args.term_timeout)

    done = [j for j in jobs if j.state == "done"]
    failed = [j for j in jobs if j.state not in ("done", "unfinished", "unsubmitted")]
    never = [j for j in jobs if j.state in ("unfinished", "unsubmitted")]
    lat = [j.done_at - j.submitted for j in done]
    wait = [j.started - j.submitted for j in done if j.started is not None]
    first = min((j.first_try for j in jobs if j.first_try is not None), default=t_start)
    last = max((j.done_at for j in done), default=t_end)
    span = last - first if done else None
    per_hour = len(done) / span * 3600 if span else None
    rejected = sum(j.rejected for j in jobs)
    gen = histogram_means(before, after, "trellis_serve_generation_seconds", None).get(None)
    stages = histogram_means(before, after, "trellis_serve_stage_seconds", "stage")
    jobs_total = {
        s: (metric(after, "trellis_serve_jobs_total", state=s) or 0)
        - (metric(before, "trellis_serve_jobs_total", state=s) or 0)
        for s in label_values(after, "trellis_serve_jobs_total", "state")
    }
    mem = {
        d: metric(after, "trellis_serve_device_memory_bytes", device=d)
        for d in label_values(after, "trellis_serve_device_memory_bytes", "device")
    }

    print()
    print(
        f"trellis-serve load: {url}, {args.clients} clients, {len(jobs)} jobs ({len(done)} done, "
        f"{len(failed)} failed, {len(never)} not finished), follow={args.follow}, "
        f"formats={','.join(args.formats)}"
    )
    if ready_s is not None:
        print(f"  server start -> ready:       {ready_s:.2f} s")
    if warm_s is not None:
        print(f"  warm-up ({args.warmup} jobs, not counted): {warm_s:.2f} s")
    print(f"  wall (first submit -> last done): {fmt(span)}")
    print(
        f"  throughput:                  {fmt(per_hour, 'generations/hour', 0)}"
        + (
            f" = {per_hour / devices:.0f} per device ({devices} device{'s' if devices > 1 else ''})"
            if per_hour
            else ""
        )
    )
    print(
        f"  latency submit -> done:      p50 {fmt(pct(lat, 50))}, p99 {fmt(pct(lat, 99))}, "
        f"max {fmt(max(lat) if lat else None)}"
    )
    print(f"  queue wait (-> first stage): p50 {fmt(pct(wait, 50))}, p99 {fmt(pct(wait, 99))}")
    print(
        f"  queue: {rejected} × 429 (jobs that met one: {sum(1 for j in jobs if j.rejected)}), "
        f"max depth seen {sampler.max_depth:.0f} ({sampler.samples} /metrics reads"
        + (f", {sampler.errors} failed" if sampler.errors else "")
        + ")"
    )
    if gen:
        print(f"  server generation time:      mean {gen[0]:.2f} s over {gen[1]}")
    if stages:
        print("  server stage times (mean):   " + ", ".join(f"{k} {v[0]:.3f} s" for k, v in stages.items()))
    if jobs_total:
        print("  server jobs_total over the run: " + ", ".join(f"{k} {v:.0f}" for k, v in jobs_total.items()))
    if mem:
        print(
            "  device memory: "
            + ", ".join(f"{d} {v / 2**20:.0f} MiB" for d, v in mem.items() if v is not None)
        )
    glb = [j.glb_bytes for j in done if j.glb_bytes]
    if glb:
        print(
            f"  GLBs fetched: {len(glb)}, {statistics.median(glb) / 1024:.0f} KiB median; "
            f"voxels {min(j.voxels or 0 for j in done)}..{max(j.voxels or 0 for j in done)}"
        )
    if args.follow == "events" and done:
        seen = sorted({j.steps_seen for j in done})
        print(f"  sampler steps streamed per done job: {', '.join(map(str, seen))}")
    for j in failed[:10]:
        print(f"  FAILED job {j.n} ({j.id}): {j.state}: {j.error}")
    if never:
        print(f"  {len(never)} jobs not finished within --timeout {args.timeout:g} s (cancelled)")
    if term is not None:
        print(f"  SIGTERM: exit status {term[0]} after {term[1]:.2f} s")
        if term[0] != 0:
            tail(log_path)
            status = 1

    exe = None
    if args.exe_runs:
        walls, failures, exe_span = exe_runs(args, devices)
        exe_per_hour = len(walls) / exe_span * 3600 if walls and exe_span else None
        exe = {
            "runs": args.exe_runs,
            "ok": len(walls),
            "walls_s": walls,
            "span_s": exe_span,
            "per_hour": exe_per_hour,
            "per_hour_per_device": exe_per_hour / devices if exe_per_hour else None,
            "failures": failures,
        }
        print(
            f"\none {Path(args.start).name} process per generation: {len(walls)}/{args.exe_runs} ok, "
            f"process wall p50 {fmt(pct(walls, 50))} (min {fmt(min(walls) if walls else None)}, "
            f"max {fmt(max(walls) if walls else None)}), {fmt(exe_per_hour, 'generations/hour', 0)}"
            + (f" = {exe_per_hour / devices:.0f} per device" if exe_per_hour else "")
        )
        if per_hour and exe_per_hour:
            print(f"  server / process-per-generation throughput: {per_hour / exe_per_hour:.2f}×")
        for f in failures[:5]:
            print(f"  FAILED: {f}")
        if failures:
            status = 1
        elif len(walls) < args.exe_runs:
            print(f"  {args.exe_runs - len(walls)} process runs not done within --timeout {args.timeout:g} s")
            exe["unfinished"] = args.exe_runs - len(walls)

    if failed:
        status = 1
    elif status == 0 and (never or (exe and exe.get("unfinished"))):
        status = 3

    if args.json:
        result = {
            "label": args.label,
            "url": url,
            "clients": args.clients,
            "jobs": len(jobs),
            "done": len(done),
            "failed": len(failed),
            "unfinished": len(never),
            "steps_streamed": sorted({j.steps_seen for j in done}),
            "follow": args.follow,
            "formats": args.formats,
            "devices": devices,
            "server_ready_s": ready_s,
            "warmup": args.warmup,
            "warmup_s": warm_s,
            "span_s": span,
            "per_hour": per_hour,
            "per_hour_per_device": per_hour / devices if per_hour else None,
            "latency_s": {
                "p50": pct(lat, 50),
                "p99": pct(lat, 99),
                "max": max(lat) if lat else None,
                "all": lat,
            },
            "queue_wait_s": {"p50": pct(wait, 50), "p99": pct(wait, 99)},
            "rejected_429": rejected,
            "max_queue_depth": sampler.max_depth,
            "server_generation_s": gen[0] if gen else None,
            "server_stage_s": {k: v[0] for k, v in stages.items()},
            "server_jobs_total": jobs_total,
            "device_memory_bytes": mem,
            "voxels": [j.voxels for j in done],
            "sigterm": {"status": term[0], "seconds": term[1]} if term else None,
            "errors": [f"job {j.n} ({j.id}): {j.state}: {j.error}" for j in failed],
            "exe": exe,
            "server_args": args.server_args,
            "steps_ss": args.steps_ss,
            "steps_slat": args.steps_slat,
        }
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
