"""remote_slurm after the build, through a real sshd on loopback (tests/ssh_server).

The login node is this machine reached by ``ssh`` (BatchMode, a generated key, a
known_hosts file): the build's files are uploaded with ``cat > PATH`` into a
``remote_work_dir`` whose path holds a space and quotes, submitted with sbatch there
to the test Slurm, watched and cancelled, all over ssh. An unreachable host is one
line and exit 2, with nothing submitted.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scriptbuilder.lifecycle import LifecycleError, Verdict, open_run, submit
from scriptbuilder.lifecycle.remote import upload
from scriptbuilder.lifecycle.ssh import SshTransport
from scriptbuilder.lifecycle.transport import TransportError
from scriptbuilder.models.job_spec import JobSpec
from tests.build_env import BuildEnv, make_build_env
from tests.lifecycle_cli import Done
from tests.lifecycle_cli import scriptbuilder as run_cli
from tests.slurm_cluster.cluster import SlurmCluster, _free_port
from tests.ssh_server.server import SshServer
from tests.test_slurm_jobs import cluster_slurm_env

pytestmark = pytest.mark.slurm

#: A folder name with a space, single and double quotes and a dollar sign.
ODD = 'it\'s a "remote" $dir'


def transport(server: SshServer, **changes: str) -> SshTransport:
    """A transport to ``server``; ``changes`` replace options by key (``Port="1"``)."""
    options = [o for o in server.options() if o.split("=", 1)[0] not in changes]
    options += [f"{key}={value}" for key, value in changes.items()]
    return SshTransport(server.host, user=server.user, options=options)


@pytest.fixture
def remote_env(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[BuildEnv]:
    env = make_build_env(tmp_path)
    env.slurm_env(
        **{
            **cluster_slurm_env(slurm_cluster),
            "ssh_host": "127.0.0.1",
            "slurm_user": os.environ.get("USER") or "root",
            "remote_cwd": str(env.root),
        }
    )
    yield env


def build_remote(env: BuildEnv, command: str, **fields: Any) -> dict[str, Any]:
    """Build a remote_slurm custom job whose remote checkout is on this machine."""
    remote_repo = env.root / ODD / "TensorRT-LLM"
    remote_repo.mkdir(parents=True)
    request = env.request(
        "custom",
        execution_scenario="remote_slurm",
        custom_cmd=command,
        model_name="remote",
        required_devices=1,
        time_limit="00:10:00",
        models_path=str(env.root),
        **fields,
    )
    request["remote_repo_path"] = str(remote_repo)
    request["remote_work_dir"] = str(remote_repo / "work_dirs" / ODD)
    env.build(request, environ={"HOME": str(env.root)}, machine=platform.machine).write()
    spec: dict[str, Any] = json.loads((env.work_dir / "job_spec.json").read_text())
    assert spec["remote_work_dir"] == request["remote_work_dir"], spec
    return spec


def wait_for(predicate: Any, timeout: float, message: Any) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, message()
        time.sleep(0.2)


# ----- the transport itself ----------------------------------------------------------------------


def test_files_written_and_read_back_at_odd_paths(ssh_server: SshServer, tmp_path: Path) -> None:
    ssh = transport(ssh_server)
    folder = tmp_path / ODD / "a\nb"
    made = ssh.run(["mkdir", "-p", "--", str(folder)])
    assert made.returncode == 0, made.stderr
    target = folder / "script $x.sh"
    data = b"#!/bin/bash\necho 'hi'\n" + bytes(range(256))
    ssh.write_file(str(target), data, 0o750)
    assert target.read_bytes() == data
    assert target.stat().st_mode & 0o777 == 0o750
    assert sorted(p.name for p in folder.iterdir()) == ["script $x.sh"]  # no temporary left
    assert ssh.read_head(str(target), 11) == data[:11]
    assert ssh.read_tail(str(target), 5) == data[-5:]
    assert ssh.read_tail(str(folder / "missing"), 5) is None
    assert ssh.read_head(str(folder / "missing"), 5) is None
    echoed = ssh.run(["printf", "%s|", "a b", "'", '"', "$HOME", "`id`", "\\"])
    assert echoed.stdout.decode() == "a b|'|\"|$HOME|`id`|\\|"


def test_remote_shell_sees_the_test_slurm(
    ssh_server: SshServer, slurm_cluster: SlurmCluster
) -> None:
    done = transport(ssh_server).run(["sinfo", "--noheader", "--format=%P"])
    assert done.returncode == 0, done.stderr
    assert "gpu" in done.stdout.decode()


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"Port": "<free>"}, "Connection refused"),
        ({"IdentityFile": "/nonexistent/key"}, "Permission denied"),
        ({"UserKnownHostsFile": "/dev/null"}, "Host key verification failed"),
    ],
)
def test_ssh_failures_are_one_line_naming_the_host_and_fix(
    ssh_server: SshServer, changes: dict[str, str], said: str
) -> None:
    if changes.get("Port") == "<free>":
        changes = {"Port": str(_free_port())}
    with pytest.raises(TransportError) as caught:
        transport(ssh_server, **changes).run(["true"])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"ssh {ssh_server.user}@{ssh_server.host}: ")
    assert said in message and "; " in message


def test_unknown_host_name(ssh_server: SshServer) -> None:
    with pytest.raises(TransportError, match=r"nonexistent\.invalid.*check ssh_host"):
        SshTransport("nonexistent.invalid", options=ssh_server.options()).run(["true"])


def test_ssh_missing(
    ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TransportError, match=r"ssh: command not found.*openssh-client"):
        transport(ssh_server).run(["true"])


@pytest.fixture
def control_master(ssh_server: SshServer, tmp_path: Path) -> Iterator[str]:
    """The ControlPath of an open master connection, as the remote executor keeps one."""
    socket_path = tmp_path / "cm" / "ssh-%r@%h:%p"
    socket_path.parent.mkdir()
    target = f"{ssh_server.user}@{ssh_server.host}"
    master = ["ssh", "-S", str(socket_path), *(f"-o{o}" for o in ssh_server.options()), target]
    opened = subprocess.run(
        [*master[:3], "-M", "-f", "-N", "-o", "ControlPersist=yes", *master[3:]],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert opened.returncode == 0, opened.stderr
    try:
        yield str(socket_path)
    finally:
        subprocess.run([*master[:3], "-O", "exit", *master[3:]], capture_output=True, timeout=30)


#: Without a key ssh can log in only through the master connection.
KEYLESS = {"IdentityFile": "/nonexistent/key"}


def test_the_executors_control_master_is_used(ssh_server: SshServer, control_master: str) -> None:
    """With the ControlPath of a running master, no key is needed; without it, auth fails."""
    keyless = transport(ssh_server, **KEYLESS)
    through_master = SshTransport(
        ssh_server.host, ssh_server.user, control_path=control_master, options=keyless.options
    )
    assert through_master.run(["true"]).returncode == 0
    with pytest.raises(TransportError, match="Permission denied"):
        keyless.run(["true"])


# ----- upload, submit, watch, cancel ------------------------------------------------------------


def test_upload_puts_script_and_extra_files_in_remote_work_dir(
    ssh_server: SshServer, remote_env: BuildEnv
) -> None:
    spec = build_remote(remote_env, "echo uploaded")
    remote_dir = Path(spec["remote_work_dir"])
    assert not remote_dir.exists()
    script = upload(transport(ssh_server), JobSpec.model_validate(spec), remote_env.work_dir)
    assert script == str(remote_dir / spec["script_name"])
    local_script = Path(spec["script_path"])
    assert Path(script).read_bytes() == local_script.read_bytes()
    assert os.access(script, os.X_OK)
    assert spec["extra_files"], spec
    for extra in spec["extra_files"]:
        copied = remote_dir / Path(extra).name
        assert copied.read_bytes() == Path(extra).read_bytes()
    assert sorted(p.name for p in remote_dir.iterdir()) == sorted(
        [spec["script_name"], *(Path(e).name for e in spec["extra_files"])]
    )


def test_upload_with_a_missing_extra_file_sends_nothing(
    ssh_server: SshServer, remote_env: BuildEnv
) -> None:
    spec = build_remote(remote_env, "true")
    spec["extra_files"] = [*spec["extra_files"], str(remote_env.work_dir / "gone.sh")]
    with pytest.raises(TransportError, match=r"extra_files entry .*gone\.sh"):
        upload(transport(ssh_server), JobSpec.model_validate(spec), remote_env.work_dir)
    assert not Path(spec["remote_work_dir"]).exists()


def test_submit_and_watch_over_ssh(
    ssh_server: SshServer, remote_env: BuildEnv, slurm_cluster: SlurmCluster
) -> None:
    spec = build_remote(remote_env, "echo remote says hello")
    run = submit(remote_env.work_dir, transport=transport(ssh_server))
    assert run.record.host == f"ssh {ssh_server.user}@{ssh_server.host}"
    remote_dir = spec["remote_work_dir"]
    assert run.record.script_path == os.path.join(remote_dir, spec["script_name"])
    assert run.record.stdout_path == os.path.join(remote_dir, f"remote_custom_{run.job_id}.out")
    status = run.wait(timeout=180, interval=0.5)
    assert status.verdict is Verdict.PASSED, status.report
    assert "remote says hello" in Path(run.record.stdout_path or "").read_text()
    info = slurm_cluster.show_job(int(run.job_id))
    assert info["JobState"] == "COMPLETED" and info["WorkDir"] == remote_dir, info
    # the run is found again from run.json, over the same ssh settings
    again = open_run(remote_env.work_dir)
    assert again.transport.describe() == run.transport.describe()
    assert again.status().verdict is Verdict.PASSED


def test_failing_job_over_ssh(ssh_server: SshServer, remote_env: BuildEnv) -> None:
    build_remote(remote_env, "echo about to fail; exit 3")
    run = submit(remote_env.work_dir, transport=transport(ssh_server))
    status = run.wait(timeout=180, interval=0.5)
    assert status.verdict is Verdict.FAILED, status.report
    assert status.job.exit_code == 3, status.report


def test_cancel_over_ssh(
    ssh_server: SshServer, remote_env: BuildEnv, slurm_cluster: SlurmCluster
) -> None:
    build_remote(remote_env, "echo started; sleep 300")
    run = submit(remote_env.work_dir, transport=transport(ssh_server))
    log = Path(run.record.stdout_path or "")
    wait_for(lambda: log.is_file() and "started" in log.read_text(), 120, run.status)
    run.cancel()
    status = run.wait(timeout=60, interval=0.5)
    assert status.verdict is Verdict.CANCELLED, status.report
    assert slurm_cluster.show_job(int(run.job_id))["JobState"] == "CANCELLED"


def test_unreachable_host_submits_nothing(
    ssh_server: SshServer, remote_env: BuildEnv, slurm_cluster: SlurmCluster
) -> None:
    spec = build_remote(remote_env, "true")
    before = slurm_cluster.run("squeue", "--noheader", "--format=%i").stdout
    with pytest.raises(LifecycleError) as caught:
        submit(remote_env.work_dir, transport=transport(ssh_server, Port=str(_free_port())))
    assert "\n" not in str(caught.value) and "Connection refused" in str(caught.value)
    assert not (remote_env.work_dir / "run.json").exists()
    assert not Path(spec["remote_work_dir"]).exists()
    assert slurm_cluster.run("squeue", "--noheader", "--format=%i").stdout == before


# ----- the command line -------------------------------------------------------------------------


def scriptbuilder(*args: str) -> Done:
    """The CLI with no Slurm of its own: SLURM_CONF unset, so only ssh reaches the cluster."""
    return run_cli(*args, env={k: v for k, v in os.environ.items() if not k.startswith("SLURM_")})


def ssh_flags(server: SshServer, **changes: str) -> list[str]:
    options = [o for o in server.options() if o.split("=", 1)[0] not in changes]
    options += [f"{key}={value}" for key, value in changes.items()]
    return [flag for option in options for flag in ("--ssh-option", option)]


def test_submit_watch_and_cancel_on_the_command_line(
    ssh_server: SshServer, remote_env: BuildEnv, slurm_cluster: SlurmCluster
) -> None:
    spec = build_remote(remote_env, "echo started; sleep 300")
    work_dir = str(remote_env.work_dir)
    submitted = scriptbuilder("submit", work_dir, *ssh_flags(ssh_server))
    assert submitted.returncode == 0, submitted.stderr
    record = json.loads(submitted.stdout)
    assert record["host"] == f"ssh {ssh_server.user}@{ssh_server.host}", record
    assert record["script_path"].startswith(spec["remote_work_dir"] + "/"), record
    log = Path(record["stdout_path"])
    wait_for(lambda: log.is_file() and "started" in log.read_text(), 120, lambda: record)
    # a look with the ssh settings recorded in run.json, then with new ones given
    looked = scriptbuilder("status", work_dir)
    assert looked.returncode == 10 and " RUNNING " in looked.stdout, looked
    looked = scriptbuilder("status", work_dir, "--json", *ssh_flags(ssh_server))
    assert json.loads(looked.stdout)["state"] == "RUNNING", looked
    cancelled = scriptbuilder("cancel", work_dir)
    assert cancelled.returncode == 0, cancelled.stderr
    watched = scriptbuilder("watch", work_dir, "--interval", "0.5s", "--timeout", "2m")
    assert watched.returncode == 6, watched.stderr
    assert json.loads(watched.stdout)["verdict"] == "CANCELLED", watched.stdout
    assert slurm_cluster.show_job(int(record["job_id"]))["JobState"] == "CANCELLED"


def test_unreachable_host_on_the_command_line(
    ssh_server: SshServer, remote_env: BuildEnv, slurm_cluster: SlurmCluster
) -> None:
    build_remote(remote_env, "true")
    before = slurm_cluster.run("squeue", "--noheader", "--format=%i").stdout
    port = str(_free_port())
    done = scriptbuilder("submit", str(remote_env.work_dir), *ssh_flags(ssh_server, Port=port))
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"scriptbuilder: error: ssh {ssh_server.user}@127.0.0.1: ")
    assert f"port {port}: Connection refused" in done.stderr
    assert "check ssh_host" in done.stderr
    assert not (remote_env.work_dir / "run.json").exists()
    assert slurm_cluster.run("squeue", "--noheader", "--format=%i").stdout == before


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--ssh-option", "Port"], "'Port' is not KEY=VALUE"),
        (["--ssh-option", "=2222"], "'=2222' is not KEY=VALUE"),
    ],
)
def test_bad_ssh_option(remote_env: BuildEnv, args: list[str], said: str) -> None:
    build_remote(remote_env, "true")
    done = scriptbuilder("submit", str(remote_env.work_dir), *args)
    assert done.returncode == 2 and said in done.stderr, done
    assert done.stderr.count("\n") == 1, done.stderr
    assert not (remote_env.work_dir / "run.json").exists()


def test_ssh_options_refused_for_a_local_build(build_env: BuildEnv) -> None:
    build_env.build(build_env.request("custom", persistent_mode=False)).write()
    done = scriptbuilder("submit", str(build_env.work_dir), "--control-path", "/tmp/cm")
    assert done.returncode == 2, done
    assert "for remote_slurm builds" in done.stderr and "local_slurm" in done.stderr, done
    assert not (build_env.work_dir / "run.json").exists()


def test_control_path_on_the_command_line(
    ssh_server: SshServer, control_master: str, remote_env: BuildEnv
) -> None:
    """submit reaches the login node only through the master; watch reconnects the
    same way from run.json."""
    build_remote(remote_env, "echo through the master")
    work_dir = str(remote_env.work_dir)
    flags = ["--control-path", control_master, *ssh_flags(ssh_server, **KEYLESS)]
    submitted = scriptbuilder("submit", work_dir, *flags)
    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)["transport"]["control_path"] == control_master
    watched = scriptbuilder("watch", work_dir, "--interval", "0.5s", "--timeout", "3m")
    assert watched.returncode == 0, watched.stderr
    assert json.loads(watched.stdout)["verdict"] == "PASSED", watched.stdout
