"""Bring up a private one-node Slurm on loopback, submit jobs to it, tear it down.

Everything lives in a fresh temporary directory: a munge key and a private ``munged``
(own socket, run as user ``munge``), ``slurm.conf``/``gres.conf``/``plugstack.conf``,
state, spool, pid and log files, the compiled pyxis stand-in and its step record file.
Ports are picked free at start, so nothing left on the machine by an earlier run (or a
harness running at the same time) is reused or disturbed. Every Slurm client call gets
``SLURM_CONF`` pointing at this cluster's configuration.

Daemons run in the foreground (``-D``/``-F``) as children of this process and are
stopped by pid; they also get SIGTERM if the process that started them dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import grp
import itertools
import json
import os
import pwd
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scriptbuilder.lifecycle.slurm import TERMINAL, parse_scontrol

HERE = Path(__file__).resolve().parent
PLUGIN_SOURCE = HERE / "pyxis_standin.c"

# libpmix2 goes first, in its own apt-get call: the pmix MPI plugins need it, and they
# dlopen pmix2/lib/libpmix.so, which only libpmix-dev provides (libpmix2 has .so.2 only).
PACKAGES_FIRST: tuple[str, ...] = ("libpmix2", "libpmix-dev")
PACKAGES: tuple[str, ...] = (
    "slurmctld",
    "slurmd",
    "slurm-client",
    "munge",
    "libslurm-dev",
    "gcc",
    "libc6-dev",  # only a Recommends of gcc, and installs run with --no-install-recommends
)
GPUS_PER_NODE = 8
TERMINAL_STATES = TERMINAL


class SlurmUnavailable(RuntimeError):
    """Slurm cannot be brought up on this machine (not root, no apt-get, install failed...)."""


class SbatchError(RuntimeError):
    """sbatch refused a script; ``.result`` is the CompletedProcess."""

    def __init__(self, result: subprocess.CompletedProcess[str]) -> None:
        super().__init__(
            f"sbatch exited {result.returncode}: {result.stderr.strip() or result.stdout.strip()}"
        )
        self.result = result


class JobTimeout(TimeoutError):
    """A job did not end within the timeout; it has been cancelled."""


def tools_dir() -> Path:
    """Directory of the stand-in tools (nvidia-smi, pip, trtllm-*, pytest, record-argv).

    Put it first on PATH of a job. Executable bits are restored if a checkout lost them.
    """
    tools = HERE / "tools"
    for entry in tools.iterdir():
        if entry.is_file() and not entry.name.startswith(("_", ".")):
            mode = entry.stat().st_mode
            if mode & 0o111 != 0o111:
                entry.chmod(mode | 0o755)
    return tools


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file; a missing file has none."""
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        return []
    # split at "\n" only: str.splitlines also breaks at U+0085 and U+2028, which
    # the pyxis stand-in's records hold raw when a job's values do
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        content = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"
    return "\n".join(content[-lines:])


def _dpkg_installed(package: str) -> bool:
    if shutil.which("dpkg-query") is None:
        return False
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return result.returncode == 0 and result.stdout.strip().endswith("install ok installed")


def missing_packages() -> list[str]:
    """Debian packages of the harness that are not installed."""
    return [p for p in (*PACKAGES_FIRST, *PACKAGES) if not _dpkg_installed(p)]


def _apt_get(*args: str, timeout: float = 1200.0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", NEEDRESTART_MODE="a")
    return subprocess.run(
        ["apt-get", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=timeout,
        check=False,
    )


def ensure_packages() -> None:
    """Install the Debian packages that are missing (libpmix2 first), or raise SlurmUnavailable."""
    missing = missing_packages()
    if not missing:
        return
    if os.geteuid() != 0:
        raise SlurmUnavailable(f"packages {' '.join(missing)} missing and not running as root")
    if shutil.which("apt-get") is None:
        raise SlurmUnavailable(f"packages {' '.join(missing)} missing and no apt-get")
    install = (
        "install",
        "-y",
        "-q",
        "--no-install-recommends",
        "-o",
        "Dpkg::Options::=--force-confdef",
        "-o",
        "Dpkg::Options::=--force-confold",
    )
    updated = False
    for group in (PACKAGES_FIRST, PACKAGES):
        wanted = [p for p in group if p in missing]
        if not wanted:
            continue
        result = _apt_get(*install, *wanted)
        if result.returncode != 0 and not updated:
            _apt_get("update", "-q")
            updated = True
            result = _apt_get(*install, *wanted)
        if result.returncode != 0:
            out = (result.stdout + result.stderr).strip().splitlines()[-15:]
            raise SlurmUnavailable(
                f"apt-get install {' '.join(wanted)} failed ({result.returncode}):\n"
                + "\n".join(out)
            )
    still = missing_packages()
    if still:
        raise SlurmUnavailable(f"packages still missing after apt-get: {' '.join(still)}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def terminate(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM ``proc`` if it still runs; SIGKILL when it has not ended in 15 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _die_with_parent() -> None:
    """preexec_fn: SIGTERM the child when the thread that started it dies."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def _mem_mib() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return max(256, int(line.split()[1]) // 1024 * 9 // 10)
    except (OSError, ValueError, IndexError):
        pass
    return 1024


@dataclass
class JobResult:
    """How a batch job ended, as ``scontrol show job`` tells it."""

    job_id: int
    state: str
    exit_code: int
    signal: int
    stdout_path: Path | None
    stderr_path: Path | None
    record_file: Path
    info: dict[str, str] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED" and self.exit_code == 0

    def stdout(self) -> str:
        """Content of the job's --output file ('' if absent)."""
        return _read_or_empty(self.stdout_path)

    def stderr(self) -> str:
        """Content of the job's --error file ('' if absent; same as stdout if not split)."""
        return _read_or_empty(self.stderr_path)

    def tool_records(self) -> list[dict[str, Any]]:
        """Records the stand-in tools wrote during this job (STANDIN_RECORD of the submit)."""
        return read_jsonl(self.record_file)

    def describe(self) -> str:
        """A human summary for assertion messages: state, exit code, output tails."""
        parts = [
            f"job {self.job_id}: JobState={self.state} ExitCode={self.exit_code}:{self.signal} "
            f"Reason={self.info.get('Reason', '?')}"
        ]
        for label, path in (("stdout", self.stdout_path), ("stderr", self.stderr_path)):
            if path is not None:
                parts.append(f"--- {label} {path}:\n{_read_or_empty(path)[-3000:]}")
        return "\n".join(parts)


def _read_or_empty(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return path.read_text(errors="surrogateescape")
    except OSError:
        return ""


class SlurmCluster:
    """A private one-node Slurm: node ``hostname``, partitions ``gpu`` (gpu:8) and ``cpu``.

    Use as a context manager or call ``start()``/``stop()``.
    """

    def __init__(self, base_dir: Path | None = None, *, start_timeout: float = 60.0) -> None:
        self._given_base = base_dir
        self.start_timeout = start_timeout
        self.hostname = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1
        self.partitions: dict[str, str] = {"gpu": "gpu", "cpu": "cpu"}
        self.base = Path()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._records = itertools.count()
        self._env: dict[str, str] = {}
        self.startup_seconds: float = 0.0
        self.mpi_plugins: list[str] = []

    # ----- paths -----------------------------------------------------------------------

    @property
    def conf_path(self) -> Path:
        return self.base / "etc" / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.base / "munge" / "munge.socket"

    @property
    def step_record_file(self) -> Path:
        """JSON lines written by the pyxis stand-in, one per task of every srun step."""
        return self.base / "pyxis" / "steps.jsonl"

    @property
    def log_dir(self) -> Path:
        return self.base / "log"

    @property
    def env(self) -> dict[str, str]:
        """Environment for Slurm client calls: SLURM_CONF set, tools dir first on PATH."""
        return dict(self._env)

    # ----- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> SlurmCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Install what is missing, write the configuration, start munged/slurmctld/slurmd.

        Raises SlurmUnavailable when the machine cannot run Slurm, RuntimeError (with the
        daemon log tails) when it should but the node does not come up in time.
        """
        if os.geteuid() != 0:
            raise SlurmUnavailable("the Slurm harness must run as root (it starts slurmd)")
        ensure_packages()
        began = time.monotonic()
        if self._given_base is not None:
            self.base = self._given_base
            self.base.mkdir(parents=True, exist_ok=True)
        else:
            self.base = Path(tempfile.mkdtemp(prefix="slurm-harness-"))
        try:
            self.base.chmod(0o755)
            self._layout()
            self._start_munged()
            self._write_config()
            self._build_plugin()
            self._start_slurm()
            self._check_pmix()
        except BaseException:
            self.stop(remove=False)
            raise
        self.startup_seconds = time.monotonic() - began

    def stop(self, *, remove: bool | None = None) -> None:
        """Cancel jobs, stop the daemons this object started (by pid), remove the temp dir.

        The directory is kept when ``remove`` is False or env SLURM_HARNESS_KEEP=1.
        """
        if self._procs.get("slurmctld") is not None and self._alive("slurmctld"):
            self._run(["scancel", "--user", str(os.geteuid())], timeout=15, check=False)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                queue = self._run(["squeue", "-h", "-o", "%i"], timeout=10, check=False)
                if queue.returncode != 0 or not queue.stdout.strip():
                    break
                time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                terminate(proc)
        if remove is None:
            remove = os.environ.get("SLURM_HARNESS_KEEP", "") not in ("1", "true", "yes")
        if remove and self._given_base is None and self.base != Path() and self.base.exists():
            shutil.rmtree(self.base, ignore_errors=True)

    def _alive(self, name: str) -> bool:
        proc = self._procs.get(name)
        return proc is not None and proc.poll() is None

    def _layout(self) -> None:
        for sub in ("etc", "state", "spool", "run", "log", "tmp", "dev", "records", "pyxis"):
            (self.base / sub).mkdir(exist_ok=True)
        (self.base / "tmp").chmod(0o1777)
        (self.base / "pyxis").chmod(0o1777)
        for i in range(GPUS_PER_NODE):
            # a character device (here /dev/null) makes slurmd export CUDA_VISIBLE_DEVICES;
            # with plain files it only sets SLURM_GPUS_ON_NODE
            device = self.base / "dev" / f"gpu{i}"
            if not device.is_symlink():
                device.symlink_to("/dev/null")
        self.step_record_file.touch()
        self.step_record_file.chmod(0o666)

    def _start_munged(self) -> None:
        munge_dir = self.base / "munge"
        munge_dir.mkdir(exist_ok=True)
        key = munge_dir / "munge.key"
        try:
            uid = pwd.getpwnam("munge").pw_uid
            gid = grp.getgrnam("munge").gr_gid
        except KeyError as exc:
            raise SlurmUnavailable("no 'munge' user (package munge not installed?)") from exc
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        os.chown(munge_dir, uid, gid)
        munge_dir.chmod(0o755)
        os.chown(key, uid, gid)
        key.chmod(stat.S_IRUSR)
        munged = shutil.which("munged") or "/usr/sbin/munged"
        log = self.log_dir / "munged.out"
        with log.open("wb") as out:
            self._procs["munged"] = subprocess.Popen(
                [
                    munged,
                    "--foreground",
                    f"--socket={self.munge_socket}",
                    f"--key-file={key}",
                    f"--pid-file={munge_dir / 'munged.pid'}",
                    f"--log-file={munge_dir / 'munged.log'}",
                    f"--seed-file={munge_dir / 'munged.seed'}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                user=uid,
                group=gid,
                extra_groups=[],
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if not self._alive("munged"):
                raise RuntimeError(f"munged exited at start:\n{_tail(log)}")
            if self.munge_socket.exists():
                probe = subprocess.run(
                    f"munge -n -S {self.munge_socket} | unmunge -S {self.munge_socket}",
                    shell=True,
                    capture_output=True,
                    text=True,
                    stdin=subprocess.DEVNULL,
                    timeout=10,
                    check=False,
                )
                if probe.returncode == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"munged did not answer within 15 s:\n{_tail(log)}")

    def _write_config(self) -> None:
        b = self.base
        ctld_port = _free_port()
        slurmd_port = _free_port()
        while slurmd_port == ctld_port:
            slurmd_port = _free_port()
        host = self.hostname
        conf = f"""\
# Written by tests/slurm_cluster/cluster.py: a private one-node test cluster.
ClusterName=harness
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
GresTypes=gpu
ReturnToService=2
MinJobAge=86400
FirstJobId={random.randint(1000, 900000)}
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
SlurmdParameters=config_overrides
InactiveLimit=0
KillWait=5
MessageTimeout=20
SlurmctldTimeout=60
SlurmdTimeout=120
StateSaveLocation={b / "state"}
SlurmdSpoolDir={b / "spool"}
SlurmctldPidFile={b / "run" / "slurmctld.pid"}
SlurmdPidFile={b / "run" / "slurmd.pid"}
SlurmctldLogFile={self.log_dir / "slurmctld.log"}
SlurmdLogFile={self.log_dir / "slurmd.log"}
SlurmctldDebug=info
SlurmdDebug=info
TmpFS={b / "tmp"}
PlugStackConfig={b / "etc" / "plugstack.conf"}
NodeName={host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={_mem_mib()} \
Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN
PartitionName={self.partitions["gpu"]} Nodes={host} Default=YES MaxTime=INFINITE State=UP
PartitionName={self.partitions["cpu"]} Nodes={host} MaxTime=INFINITE State=UP
"""
        self.conf_path.write_text(conf)
        (b / "etc" / "gres.conf").write_text(
            f"AutoDetect=off\n"
            f"NodeName={host} Name=gpu File={b / 'dev'}/gpu[0-{GPUS_PER_NODE - 1}]\n"
        )
        (b / "etc" / "plugstack.conf").write_text(
            f"required {b / 'pyxis' / 'pyxis_standin.so'} record={self.step_record_file} "
            f"state_dir={b / 'pyxis'}\n"
        )
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "SQUEUE_", "SINFO_"))
        }
        env["SLURM_CONF"] = str(self.conf_path)
        env["PATH"] = f"{tools_dir()}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
        env.pop("STANDIN_RECORD", None)
        self._env = env

    def _build_plugin(self) -> None:
        gcc = shutil.which("gcc")
        if gcc is None:
            raise SlurmUnavailable("gcc not found")
        out = self.base / "pyxis" / "pyxis_standin.so"
        result = subprocess.run(
            [gcc, "-shared", "-fPIC", "-O1", "-Wall", "-o", str(out), str(PLUGIN_SOURCE)],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"building the pyxis stand-in failed:\n{result.stderr}")

    def _start_daemon(self, name: str) -> None:
        binary = shutil.which(name) or f"/usr/sbin/{name}"
        args = [binary, "-D", "-f", str(self.conf_path)]
        if name == "slurmctld":
            args.append("-i")
        with (self.log_dir / f"{name}.out").open("wb") as out:
            self._procs[name] = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env,
                cwd=self.base,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    def _logs(self) -> str:
        parts = []
        for name in ("slurmctld", "slurmd"):
            for suffix in (".log", ".out"):
                path = self.log_dir / f"{name}{suffix}"
                if path.exists() and path.stat().st_size:
                    parts.append(f"--- {path} (tail):\n{_tail(path)}")
        return "\n".join(parts)

    def _start_slurm(self) -> None:
        self._start_daemon("slurmctld")
        deadline = time.monotonic() + self.start_timeout
        while True:
            if not self._alive("slurmctld"):
                raise RuntimeError(f"slurmctld exited at start\n{self._logs()}")
            ping = self._run(["scontrol", "ping"], timeout=10, check=False)
            if ping.returncode == 0 and "UP" in ping.stdout:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"slurmctld did not answer in time\n{self._logs()}")
            time.sleep(0.2)
        self._start_daemon("slurmd")
        state = ""
        while True:
            for name in ("slurmctld", "slurmd"):
                if not self._alive(name):
                    raise RuntimeError(f"{name} exited at start\n{self._logs()}")
            node = self._run(["scontrol", "show", "node", self.hostname], timeout=10, check=False)
            fields = parse_scontrol(node.stdout)
            state = fields.get("State", "")
            if state == "IDLE":
                return
            if "DRAIN" in state or "INVAL" in state:
                raise RuntimeError(
                    f"node {self.hostname} is {state}: {fields.get('Reason', '')}\n{self._logs()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"node {self.hostname} not idle within {self.start_timeout:.0f} s "
                    f"(State={state})\n{self._logs()}"
                )
            time.sleep(0.2)

    def _check_pmix(self) -> None:
        result = self._run(["srun", "--mpi=list"], timeout=30, check=False)
        text = result.stdout + result.stderr
        if not re.search(r"\bpmix\b", text):
            raise RuntimeError(f"srun --mpi=list does not offer pmix:\n{text}\n{self._logs()}")
        self.mpi_plugins = sorted(set(re.findall(r"\b(pmix\w*|pmi2|none|cray_shasta)\b", text)))

    # ----- client calls ------------------------------------------------------------------

    def _run(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 60.0,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            errors="surrogateescape",
            stdin=subprocess.DEVNULL,
            env=dict(env if env is not None else self._env),
            cwd=cwd,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise subprocess.CalledProcessError(
                result.returncode, result.args, result.stdout, result.stderr
            )
        return result

    def run(
        self,
        *args: str,
        env_extra: Mapping[str, str | None] | None = None,
        cwd: Path | None = None,
        timeout: float = 60.0,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run any command (``scontrol``, ``sinfo``, ``srun``...) against this cluster."""
        return self._run(
            args, env=self.job_env(env_extra=env_extra), cwd=cwd, timeout=timeout, check=check
        )

    def new_record_file(self, name: str | None = None) -> Path:
        """A fresh, empty path for STANDIN_RECORD."""
        stem = f"{name or 'rec'}-{next(self._records):04d}"
        path = self.base / "records" / f"{stem}.jsonl"
        if path.exists():
            path.unlink()
        return path

    def job_env(
        self,
        *,
        record_file: Path | None = None,
        env_extra: Mapping[str, str | None] | None = None,
    ) -> dict[str, str]:
        """``env`` plus STANDIN_RECORD (if given) and ``env_extra`` (None removes a name)."""
        env = dict(self._env)
        if record_file is not None:
            env["STANDIN_RECORD"] = str(record_file)
        for key, value in (env_extra or {}).items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def test_only(
        self,
        script_path: Path | str,
        *sbatch_args: str,
        env_extra: Mapping[str, str | None] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``sbatch --test-only [args] script``: validates without queueing (rc 0 = accepted)."""
        script = Path(script_path)
        return self._run(
            ["sbatch", "--test-only", *sbatch_args, str(script)],
            env=self.job_env(env_extra=env_extra),
            cwd=script.parent,
            timeout=30,
            check=False,
        )

    def submit(
        self,
        script_path: Path | str,
        *,
        env_extra: Mapping[str, str | None] | None = None,
        timeout: float = 120.0,
        sbatch_args: Sequence[str] = (),
        cwd: Path | None = None,
        record_file: Path | None = None,
    ) -> JobResult:
        """Submit with ``sbatch --parsable`` and wait until the job has ended.

        The job gets this cluster's env (SLURM_CONF, tools first on PATH), a fresh
        STANDIN_RECORD file (or ``record_file``) and ``env_extra``; it is submitted from
        ``cwd`` (default: the script's directory). Raises SbatchError if sbatch refuses the
        script and JobTimeout (after scancel) if it does not end within ``timeout`` seconds.
        """
        script = Path(script_path)
        record = record_file if record_file is not None else self.new_record_file()
        env = self.job_env(record_file=record, env_extra=env_extra)
        result = self._run(
            ["sbatch", "--parsable", *sbatch_args, str(script)],
            env=env,
            cwd=cwd if cwd is not None else script.parent,
            timeout=60,
            check=False,
        )
        if result.returncode != 0:
            raise SbatchError(result)
        job_id = int(result.stdout.strip().splitlines()[-1].split(";")[0])
        return self.wait(job_id, timeout=timeout, record_file=record)

    def show_job(self, job_id: int) -> dict[str, str]:
        """Fields of ``scontrol show job`` ({} if the job is unknown)."""
        result = self._run(["scontrol", "show", "job", str(job_id)], timeout=30, check=False)
        return parse_scontrol(result.stdout) if result.returncode == 0 else {}

    def wait(self, job_id: int, *, timeout: float = 120.0, record_file: Path) -> JobResult:
        """Poll ``scontrol show job`` until the job is in a terminal state."""
        deadline = time.monotonic() + timeout
        interval = 0.1
        info: dict[str, str] = {}
        while True:
            info = self.show_job(job_id)
            state = info.get("JobState", "")
            if state in TERMINAL_STATES:
                break
            if time.monotonic() > deadline:
                self._run(["scancel", str(job_id)], timeout=30, check=False)
                raise JobTimeout(
                    f"job {job_id} still {state or 'unknown'} after {timeout:.0f} s "
                    f"(cancelled): {info}"
                )
            time.sleep(interval)
            interval = min(interval * 1.5, 0.25)
        code, _, sig = info.get("ExitCode", "0:0").partition(":")
        stdout = info.get("StdOut") or None
        stderr = info.get("StdErr") or None
        return JobResult(
            job_id=job_id,
            state=state,
            exit_code=int(code or 0),
            signal=int(sig or 0),
            stdout_path=Path(stdout) if stdout else None,
            stderr_path=Path(stderr) if stderr else None,
            record_file=record_file,
            info=info,
            steps=self.step_records(job_id),
        )

    def step_records(self, job_id: int | None = None) -> list[dict[str, Any]]:
        """Records of the pyxis stand-in (event "task" or "rejected"), optionally of one job."""
        records = read_jsonl(self.step_record_file)
        if job_id is None:
            return records
        return [r for r in records if r.get("job_id") == job_id]

    def run_in_allocation(
        self,
        script_path: Path | str,
        *salloc_args: str,
        env_extra: Mapping[str, str | None] | None = None,
        record_file: Path | None = None,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """``salloc [args] bash script``: the script runs here, with SLURM_* of a held
        allocation exported, as the executor's persistent mode does (srun steps inside use
        the allocation). Returns the CompletedProcess of salloc (rc is the script's)."""
        script = Path(script_path)
        env = self.job_env(record_file=record_file, env_extra=env_extra)
        return self._run(
            ["salloc", *salloc_args, "bash", str(script)],
            env=env,
            cwd=script.parent,
            timeout=timeout,
            check=False,
        )


@contextlib.contextmanager
def running_cluster(base_dir: Path | None = None) -> Iterator[SlurmCluster]:
    """``with running_cluster() as cluster: ...``"""
    cluster = SlurmCluster(base_dir)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
