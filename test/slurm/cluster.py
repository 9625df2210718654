"""A throw-away single-node Slurm cluster for tests, started from Debian's
packages (slurm-wlm, munge) without systemd.

Everything lives in one temporary directory: a generated munge key and its own
munged socket, a generated slurm.conf (its own ports, state/spool/log
directories, localhost as the only node with the real CPU count and, on
request, fake GPUs; proctrack/linuxproc, task/none, no cgroups). The daemons run in the
foreground as children of this process; `stop()` cancels the jobs and ends,
by pid, every process that carries this cluster's SLURM_CONF in its
environment (the daemons, slurmstepd, the job scripts and their children).

Client commands find the cluster through `cluster.env` (SLURM_CONF; the munge
socket is named in slurm.conf's AuthInfo). Needs root (slurmd runs jobs as
the submitting user) -- CI runs as root in a container.

    python3 test/slurm/cluster.py        # smoke test: start, sbatch hostname, stop
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "scancel", "squeue", "sinfo", "scontrol")


def missing_programs() -> list[str]:
    """The Slurm/munge programs not found on PATH (or in /usr/sbin)."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [p for p in DAEMONS + CLIENTS if shutil.which(p, path=path) is None]


def _which(p: str) -> str:
    found = shutil.which(p, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if found is None:
        raise FileNotFoundError(p)
    return found


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class ClusterError(RuntimeError):
    pass


class Cluster:
    def __init__(
        self, root: Path | None = None, cpus: int | None = None, gpus: int = 0, name: str = "trellisci"
    ):
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="slurm-"))
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)  # munged refuses group/other-writable directories
        self.cpus = cpus or len(os.sched_getaffinity(0))
        self.gpus = gpus  # fake "gpu" GRES (device files linked to /dev/null): exercises --gres=gpu:1
        self.name = name
        self.conf = self.root / "slurm.conf"
        munge_dir = self.root / "munge"
        if len(str(munge_dir)) > 80:  # a socket path must fit sockaddr_un (108 bytes)
            munge_dir = Path(tempfile.mkdtemp(prefix="munge-", dir="/tmp"))
            self._remove = [munge_dir]
        else:
            self._remove = []
        self.munge_socket = munge_dir / "munge.socket"
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = dict(os.environ)
        self.env["SLURM_CONF"] = str(self.conf)
        for k in list(self.env):  # no settings of an enclosing allocation
            if k.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SINFO_", "SCANCEL_")) and k != "SLURM_CONF":
                del self.env[k]

    # -- start / stop ---------------------------------------------------------

    def start(self, timeout: float = 60) -> "Cluster":
        try:
            self._start_munge(timeout)
            self._write_conf()
            self._start_slurm(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, key: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.root / "log" / f"{key}.out", "ab")
        p = subprocess.Popen(
            argv,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.procs[key] = p
        return p

    def _check_alive(self, key: str):
        p = self.procs[key]
        if p.poll() is not None:
            raise ClusterError(f"{key} exited with status {p.returncode}:\n{self.logs(key)}")

    def _start_munge(self, timeout: float):
        (self.root / "log").mkdir(exist_ok=True)
        d = self.munge_socket.parent
        d.mkdir(mode=0o700, exist_ok=True)
        key = d / "munge.key"
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400), "wb") as f:  # munged wants 0400
            f.write(os.urandom(1024))
        self._spawn(
            "munged",
            [
                _which("munged"),
                "--foreground",
                "--force",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={d / 'munged.pid'}",
                f"--seed-file={d / 'munged.seed'}",
                f"--log-file={self.root / 'log' / 'munged.log'}",
                "--num-threads=2",
            ],
        )
        deadline = time.monotonic() + timeout
        while not self.munge_socket.exists():
            self._check_alive("munged")
            if time.monotonic() > deadline:
                raise ClusterError("munged did not create its socket in time:\n" + self.logs("munged"))
            time.sleep(0.1)

    def _write_conf(self):
        for sub in ("state", "spool", "log", "run"):
            (self.root / sub).mkdir(exist_ok=True)
        ctld_port, slurmd_port = _free_ports(2)
        r = self.root
        gres = ""
        if self.gpus:
            # Slurm wants a device file per GPU: links to /dev/null named like
            # NVIDIA's (the index is the number); CUDA_VISIBLE_DEVICES follows it.
            (r / "dev").mkdir(exist_ok=True)
            for i in range(self.gpus):
                (r / "dev" / f"nvidia{i}").symlink_to("/dev/null")
            (r / "gres.conf").write_text(
                f"AutoDetect=off\nName=gpu File={r / 'dev'}/nvidia[0-{self.gpus - 1}]\n"
            )
            gres = f" Gres=gpu:{self.gpus}"
        self.conf.write_text(
            f"""\
# Generated by test/slurm/cluster.py: a single-node test cluster.
ClusterName={self.name}
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={r / 'state'}
SlurmdSpoolDir={r / 'spool'}/%n
SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}
SlurmdPidFile={r / 'run' / 'slurmd.pid'}
SlurmctldLogFile={r / 'log' / 'slurmctld.log'}
SlurmdLogFile={r / 'log' / 'slurmd.log'}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MaxArraySize=10001
KillWait=5
MinJobAge=300
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
# A pending job starts as soon as resources free up (the default waits for
# the next scheduling pass).
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
{"GresTypes=gpu" if self.gpus else ""}
NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus}{gres} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""
        )

    def _start_slurm(self, timeout: float):
        (self.root / "spool" / "localhost").mkdir(parents=True, exist_ok=True)
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-c", "-i", "-f", str(self.conf)])
        deadline = time.monotonic() + timeout
        while True:  # the controller answers
            self._check_alive("slurmctld")
            r = self.run("scontrol", "ping", check=False)
            if r.returncode == 0 and "UP" in r.stdout:
                break
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"slurmctld does not answer: {r.stdout}{r.stderr}\n" + self.logs("slurmctld")
                )
            time.sleep(0.3)
        self._spawn("slurmd", [_which("slurmd"), "-D", "-N", "localhost", "-f", str(self.conf)])
        while True:  # the node registered and is idle
            self._check_alive("slurmd")
            self._check_alive("slurmctld")
            r = self.run("sinfo", "-h", "-N", "-o", "%T", check=False)
            state = r.stdout.strip().lower()
            if state.startswith(("idle", "mixed", "alloc")):
                break
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"node not ready (state {state!r}):\n" + self.logs("slurmd") + self.logs("slurmctld")
                )
            time.sleep(0.3)

    def stop(self):
        """Cancel every job, then end this cluster's processes by pid (also on
        a half-started cluster). Safe to call twice."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None and self.conf.exists():
            try:
                user = pwd.getpwuid(os.getuid()).pw_name
                self.run("scancel", "--full", "--quiet", "-u", user, check=False, timeout=20)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    r = self.run("squeue", "-h", "-o", "%i", check=False, timeout=10)
                    if r.returncode != 0 or not r.stdout.strip():
                        break
                    time.sleep(0.3)
            except subprocess.TimeoutExpired:
                pass  # the processes are ended below anyway
        for key in ("slurmd", "slurmctld"):
            self._terminate(self.procs.get(key))
        self._kill_leftovers()
        self._terminate(self.procs.get("munged"))
        self.procs.clear()
        for d in self._remove:
            shutil.rmtree(d, ignore_errors=True)

    @staticmethod
    def _terminate(p: subprocess.Popen | None):
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)

    def _own_pids(self) -> list[int]:
        """Processes whose environment names this cluster's slurm.conf:
        slurmstepd, the batch scripts and whatever they started."""
        marker = f"SLURM_CONF={self.conf}".encode()
        pids = []
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == os.getpid():
                continue
            try:
                env = Path(f"/proc/{d}/environ").read_bytes()
            except OSError:
                continue
            if marker in env.split(b"\0"):
                pids.append(int(d))
        return pids

    def _kill_leftovers(self):
        mine = {p.pid for p in self.procs.values()}
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            pids = [p for p in self._own_pids() if p not in mine]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and any(_alive(p) for p in pids):
                time.sleep(0.1)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- client commands ------------------------------------------------------

    def run(self, *argv, check: bool = True, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        argv = [str(a) for a in argv]
        if "/" not in argv[0]:
            argv[0] = _which(argv[0])
        r = subprocess.run(
            argv, env=kw.pop("env", self.env), capture_output=True, text=True, timeout=timeout, **kw
        )
        if check and r.returncode != 0:
            raise ClusterError(f"{' '.join(argv)} exited with {r.returncode}:\n{r.stdout}{r.stderr}")
        return r

    def sbatch(self, *args, **kw) -> str:
        """Submits; the job id (for an array: the array's id)."""
        r = self.run("sbatch", "--parsable", *args, **kw)
        return r.stdout.strip().split(";")[0]

    def states(self, job: str) -> dict[str, str]:
        """{job id (array tasks as 12_3): state} from scontrol, which knows
        finished jobs for MinJobAge (300 s) after their end."""
        r = self.run("scontrol", "show", "job", "-o", job, check=False)
        out = {}
        for line in r.stdout.splitlines():
            f = dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", line))
            jid = f.get("JobId", "")
            if f.get("ArrayTaskId"):
                jid = f"{f['ArrayJobId']}_{f['ArrayTaskId']}"
            out[jid] = f.get("JobState", "?")
        return out

    def wait(self, job: str, timeout: float = 300, poll: float = 0.5) -> dict[str, str]:
        """Waits until no part of the job is pending, running or completing;
        returns the final states."""
        deadline = time.monotonic() + timeout
        active = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED"}
        while True:
            st = self.states(job)
            if st and not (set(st.values()) & active):
                return st
            for key in ("slurmctld", "slurmd"):
                self._check_alive(key)
            if time.monotonic() > deadline:
                raise ClusterError(f"job {job} still {st} after {timeout} s\n" + self.logs("slurmctld"))
            time.sleep(poll)

    def logs(self, key: str, tail: int = 40) -> str:
        text = ""
        for f in (self.root / "log" / f"{key}.log", self.root / "log" / f"{key}.out"):
            if f.exists():
                lines = f.read_text(errors="replace").splitlines()[-tail:]
                text += f"--- {f.name}\n" + "\n".join(lines) + "\n"
        return text


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


if __name__ == "__main__":
    t0 = time.monotonic()
    cluster = Cluster(gpus=2)
    with cluster as c:
        t1 = time.monotonic()
        print(f"cluster up in {t1 - t0:.1f} s ({c.root}, {c.cpus} CPUs, {c.gpus} fake GPUs)")
        out = c.root / "hostname-%A_%a.out"
        job = c.sbatch(
            "--array=0-3", "--gres=gpu:1", "-o", out,
            "--wrap", "echo $(hostname) task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT GPU $CUDA_VISIBLE_DEVICES",
        )  # fmt: skip
        st = c.wait(job, timeout=60)
        print(f"job {job}: {st} in {time.monotonic() - t1:.1f} s")
        for i in range(4):
            print(Path(str(out).replace("%A", job).replace("%a", str(i))).read_text().strip())
    shutil.rmtree(cluster.root)
    print(f"total {time.monotonic() - t0:.1f} s")
