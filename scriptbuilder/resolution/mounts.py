"""Procedure Step 2: the container mounts and the paths on the execution host."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, replace

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.remote_home import remote_home
from scriptbuilder.resolution.context import Context

DEFAULT_MODELS_ROOT = "/scratch.trt_llm_data/llm-models"
#: A scenario's rule for the home or the project folder on the execution host.
PathRule = Callable[[Context], str]


@dataclass(frozen=True)
class Mounts:
    #: ``host:container`` pairs: home, project, models[, custom_script's folder].
    entries: tuple[str, ...]
    project: str
    models_root: str
    #: The host folder mounted at ``models_root``, when known (for model lookups).
    models_host: str | None

    @property
    def joined(self) -> str:
        return ",".join(self.entries)

    def host_sources(self) -> list[str]:
        return [entry.split(":", 1)[0] for entry in self.entries]


def _absolute(name: str, path: str) -> str:
    if not path.startswith("/"):
        raise BuildError(f"{name} must be an absolute path, got {path!r}; pass an absolute path")
    return posixpath.normpath(path)


def _check_mountable(name: str, path: str) -> str:
    if any(char in path for char in ",:\n"):
        raise BuildError(
            f"{name} {path!r} cannot be mounted: pyxis and docker read SRC:DST[:FLAGS] "
            "entries, comma-separated; use a path without commas, colons or newlines"
        )
    return path


def cluster_home(ctx: Context) -> str:
    """The parent of remote_cwd (request, else slurm_env), else ``$HOME`` from the
    login host (ssh_host / slurm_user: request, else slurm_env)."""
    req, env = ctx.request, ctx.slurm_env
    cwd, where = req.remote_cwd, "remote_cwd input"
    if not cwd and env is not None:
        cwd, where = env.remote_cwd, "slurm_env.remote_cwd"
    if cwd:
        home = posixpath.dirname(_absolute(where.split()[0], cwd)) or "/"
        return ctx.trace.chose("home", home, f"parent of {where}")
    host = req.ssh_host or (env.ssh_host if env else None)
    if not host:
        raise BuildError(
            "home: slurm_env.remote_cwd is not set and no ssh_host is known, so the cluster "
            "home is unknown; rerun the Slurm probe with remote access so it records "
            "remote_cwd, or pass ssh_host"
        )
    user = req.slurm_user or (env.slurm_user if env else None)
    home = posixpath.normpath(remote_home(host, user, ctx.ssh))
    return ctx.trace.chose("home", home, f"ssh {host} 'echo $HOME' (remote_cwd not set)")


def local_home(ctx: Context) -> str:
    local_home = ctx.environ.get("HOME")
    if not local_home:
        raise BuildError("home: $HOME is not set; set HOME to your home folder")
    return ctx.trace.chose("home", _absolute("HOME", local_home), "$HOME")


def cluster_project(ctx: Context) -> str:
    """remote_repo_path (the scenario's checks made sure it is set)."""
    path = _absolute("remote_repo_path", ctx.request.remote_repo_path or "")
    return ctx.trace.chose("project", path, "remote_repo_path input")


def local_project(ctx: Context) -> str:
    req = ctx.request
    if not req.repo_root:
        raise BuildError("repo_root is required: pass the TensorRT-LLM checkout folder")
    return ctx.trace.chose("project", _absolute("repo_root", req.repo_root), "repo_root input")


def _models_entries(ctx: Context, root: str) -> tuple[tuple[str, ...], str | None]:
    """The models mount and its host folder (rules 1 to 4 of Step 2)."""
    req, env = ctx.request, ctx.slurm_env
    if req.checkpoint_path:
        name, rule = "checkpoint_path", "parent of checkpoint_path (rule 1)"
        host = posixpath.dirname(_absolute(name, req.checkpoint_path).rstrip("/"))
    elif req.models_path:
        name, rule = "models_path", "models_path (rule 2)"
        host = _absolute(name, req.models_path)
    elif env and env.mounts:
        mounts = tuple(env.mounts)
        ctx.trace.chose("models mount", ",".join(mounts), "slurm_env.mounts verbatim (rule 3)")
        return mounts, next((m.split(":")[0] for m in mounts if m.split(":")[1:2] == [root]), None)
    else:
        name, repo = "default_models_repo", req.env_check.default_models_repo
        rule = "env_check.default_models_repo (rule 4)"
        if not repo and ctx.env_info is not None:
            repo = ctx.env_info.default_models_repo_host()
            rule = "internal-env-info default_models_repo_host (rule 4)"
        if not repo:
            raise BuildError(
                "models mount: none of checkpoint_path, models_path, slurm_env.mounts or "
                "env_check.default_models_repo is set; pass models_path (the host folder "
                "holding the models)"
            )
        host = _absolute(name, repo)
    ctx.trace.chose("models mount", f"{host}:{root}", rule)
    return (f"{_check_mountable(name, host)}:{root}",), host


def covered(path: str, sources: list[str]) -> bool:
    return any(path == s or path.startswith(s.rstrip("/") + "/") for s in sources)


def resolve_mounts(ctx: Context, home: PathRule, project: PathRule) -> Mounts:
    """Home, project (the scenario's rules), models and, when no other mount holds it,
    custom_script's folder."""
    custom_script = ctx.request.custom_script
    custom_script_dir = posixpath.dirname(custom_script) if custom_script else None
    if root := ctx.request.llm_models_root:
        root, rule = _absolute("llm_models_root", root), "llm_models_root input"
    else:
        root, rule = DEFAULT_MODELS_ROOT, "default"
    root = _check_mountable("llm_models_root", ctx.trace.chose("llm_models_root", root, rule))
    home_dir = _check_mountable("home", home(ctx))
    checkout = _check_mountable("project", project(ctx))
    models, models_host = _models_entries(ctx, root)
    entries = (f"{home_dir}:{home_dir}", f"{checkout}:{checkout}", *models)
    mounts = Mounts(entries, checkout, root, models_host)
    if custom_script_dir and not covered(
        custom_script_dir, [e.split(":", 1)[0] for e in mounts.entries]
    ):
        extra = f"{_check_mountable('custom_script', custom_script_dir)}:{custom_script_dir}"
        ctx.trace.chose("extra mount", extra, "custom_script folder not under another mount")
        mounts = replace(mounts, entries=(*mounts.entries, extra))
    ctx.trace.chose("container_mounts", mounts.joined, "home, project, models[, extra]")
    return mounts
