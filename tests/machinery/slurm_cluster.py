"""A one-node SLURM cluster on this machine, for the tests that submit real jobs.

munged, slurmctld and slurmd are started as processes of the test session, with a
configuration of their own in a temporary folder (ports, state, logs, munge key and socket):
nothing of the machine's own SLURM or munge is read or changed, and they stop with the session.
The node is this machine (`CPUs` = its cores), jobs run as the user who submits them, and a
requeued job may start again after 5 s (`cred_expire`; SLURM's default holds it 2 minutes).

SLURM and munge come from Debian's packages: where they are missing they are installed with
apt-get if this process may (root); elsewhere the tests are skipped, saying why. slurmd must run
as root to start jobs, so the cluster runs only as root. `python -m tests.machinery.slurm_cluster`
installs what is missing, as CI does before the tests.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# What runs the cluster, and the Debian package of each.
PROGRAMS = {
    "munged": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "scontrol": "slurm-client",
}
SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
FINISHED += ("PREEMPTED", "BOOT_FAIL", "DEADLINE")


def which(program: str) -> str | None:
    """``program`` on PATH or in the system's sbin folders (a user's PATH may lack them)."""
    return shutil.which(program) or shutil.which(program, path=os.pathsep.join(SBIN))


def missing_packages() -> list[str]:
    return sorted({package for program, package in PROGRAMS.items() if which(program) is None})


def install() -> str | None:
    """Install what is missing with apt-get; None when it is all there, else why it is not."""
    packages = missing_packages()
    if not packages:
        return None
    if os.geteuid() != 0:
        return f"SLURM is not installed ({', '.join(packages)}) and installing it needs root"
    apt = which("apt-get")
    if apt is None:
        return f"SLURM is not installed ({', '.join(packages)}) and there is no apt-get"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = [apt, "install", "-y", "-q", "--no-install-recommends", *packages]
    if subprocess.run(command, env=env, capture_output=True).returncode != 0:
        # a fresh machine's package lists may be empty or stale
        subprocess.run([apt, "update", "-q"], env=env, capture_output=True)
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            return f"apt-get could not install {', '.join(packages)}: {result.stderr[-500:]}"
    still = missing_packages()
    return f"{', '.join(still)} still missing after apt-get install" if still else None


def unavailable() -> str | None:
    """Why this machine cannot run the cluster, if it cannot (installing what is missing)."""
    if not sys.platform.startswith("linux"):
        return "the one-node SLURM cluster runs on Linux only"
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs, and the tests do not run as root"
    return install()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def memory_mb() -> int:
    with open("/proc/meminfo") as meminfo:
        total_kb = int(next(line for line in meminfo if line.startswith("MemTotal")).split()[1])
    return max(1, total_kb // 1024 - 512)


@dataclass
class Cluster:
    """The running cluster: its config, and the commands the tests use."""

    root: Path
    node: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self, base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
        """``base`` (the environment jobs get: sbatch exports it) with this cluster's config."""
        return {**(base if base is not None else os.environ), "SLURM_CONF": str(self.conf), **extra}

    def run(self, *command: str, check: bool = True) -> str:
        program = which(command[0]) or command[0]
        result = subprocess.run(
            [program, *command[1:]], env=self.env(), capture_output=True, text=True, timeout=60
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {result.stdout}{result.stderr}")
        return result.stdout

    def submit(
        self, script: Path, *args: str, cwd: Path, env: dict[str, str], options: Sequence[str] = ()
    ) -> str:
        """``sbatch [options] script args`` from ``cwd``; the job id."""
        result = subprocess.run(
            [which("sbatch") or "sbatch", "--parsable", *options, str(script), *args],
            cwd=cwd,
            env=self.env(env),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` as a dict (JobState, Restarts, ExitCode...)."""
        text = self.run("scontrol", "show", "job", "-o", job_id)
        return dict(re.findall(r"(\w+)=(\S*)", text))

    def wait(self, job_id: str, timeout: float, states: Sequence[str] = FINISHED) -> dict[str, str]:
        """The job once its state is one of ``states``; fails after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["JobState"] in states:
                return job
            if time.monotonic() > deadline:
                self.run("scancel", job_id, check=False)
                raise AssertionError(f"job {job_id} still {job['JobState']} after {timeout} s")
            time.sleep(0.25)

    def stop(self) -> None:
        """Cancel every job, wait for them to end, stop the daemons this session started."""
        with contextlib.suppress(Exception):
            self.run("scancel", "--full", "--user", str(os.getuid()), check=False)
            deadline = time.monotonic() + 30
            while self.run("squeue", "-h", check=False).strip() and time.monotonic() < deadline:
                time.sleep(0.5)
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def slurm_conf(cluster: Cluster, ctld_port: int, slurmd_port: int) -> str:
    root, node = cluster.root, cluster.node
    return f"""\
ClusterName=tests
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: how long a requeued job waits before it may start again (SLURM's default: 120 s)
AuthInfo=socket={root}/munge/munge.socket,cred_expire=5
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# look at pending jobs every second (a requeued job starts as soon as it may)
SchedulerParameters=sched_interval=1,bf_interval=1
ReturnToService=2
JobRequeue=1
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
InactiveLimit=0
KillWait=30
MinJobAge=600
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={memory_mb()} State=UNKNOWN
# the tests' jobs wait more than they compute: up to 4 share each core
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""


def _wait_for(what: str, ready: object, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not ready():  # type: ignore[operator]
        if time.monotonic() > deadline:
            tail = log.read_text()[-2000:] if log.is_file() else "(no log)"
            raise RuntimeError(f"{what} did not start within {timeout} s:\n{tail}")
        time.sleep(0.2)


def start(root: Path) -> Cluster:
    """Start munged, slurmctld and slurmd with a config in ``root``; return once the node is
    idle. Stop it with `Cluster.stop`."""
    node = socket.gethostname().split(".")[0]
    cluster = Cluster(root=root, node=node)
    for folder in ("munge", "state", "spool", "log"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    munge = root / "munge"
    munge.chmod(0o700)
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    cluster.conf.write_text(slurm_conf(cluster, free_port(), free_port()))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.STDOUT}
    try:
        cluster.processes.append(
            subprocess.Popen(
                [
                    which("munged") or "munged",
                    "--foreground",
                    "--force",
                    f"--socket={munge / 'munge.socket'}",
                    f"--key-file={key}",
                    f"--log-file={root / 'log' / 'munged.log'}",
                    f"--pid-file={munge / 'munged.pid'}",
                    f"--seed-file={munge / 'munged.seed'}",
                ],
                **quiet,  # type: ignore[arg-type]
            )
        )
        socket_path = munge / "munge.socket"
        _wait_for("munged", socket_path.exists, 20, root / "log" / "munged.log")
        env = cluster.env()
        for daemon in ("slurmctld", "slurmd"):
            flags = ["-D", "-f", str(cluster.conf)] + (["-N", node] if daemon == "slurmd" else [])
            cluster.processes.append(
                subprocess.Popen([which(daemon) or daemon, *flags], env=env, **quiet)  # type: ignore[arg-type]
            )

        def idle() -> bool:
            out = cluster.run("sinfo", "-h", "-o", "%T", check=False).strip()
            return out == "idle"

        _wait_for("the SLURM node", idle, 60, root / "log" / "slurmctld.log")
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextlib.contextmanager
def running(root: Path) -> Iterator[Cluster]:
    cluster = start(root)
    try:
        yield cluster
    finally:
        cluster.stop()


if __name__ == "__main__":  # CI: install what is missing, say whether the tests can run
    reason = unavailable()
    print(f"SLURM tests: {'skipped: ' + reason if reason else 'SLURM and munge are installed'}")
