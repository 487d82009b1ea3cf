"""Procedure Step 1: the container image, and the architecture that selects it."""

from __future__ import annotations

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.image_ref import enroot_problem, parse_image
from scriptbuilder.inputs.image_tags import (
    ARCH_KEYS,
    find_properties_file,
    image_for_arch,
    normalize_arch,
    read_properties,
)
from scriptbuilder.resolution.context import Context

#: ``device_type`` prefixes of Grace-based (aarch64) systems: GB200, GB300, GH200.
GRACE_PREFIXES = ("GB", "GH")


def resolve_arch(ctx: Context) -> str:
    """``uname -m`` for local_docker; the partition's arch for Slurm, with the fallbacks."""
    req, env = ctx.request, ctx.slurm_env
    part = env.partition(req.partition or "") if env else None
    device = (req.device_type or "").strip()
    if not ctx.is_slurm:
        arch, rule = ctx.machine(), "uname -m (local_docker)"
    elif env is not None and not env.client_tools_missing and part and part.arch:
        arch, rule = part.arch, f"slurm_env partition {part.name}"
    elif device.upper().startswith(GRACE_PREFIXES):
        # Grace Blackwell / Grace Hopper nodes are Arm, as case-executor decides
        arch, rule = "aarch64", f"device_type {device} (GB*/GH*: Grace, aarch64)"
    elif ctx.env_info is not None and (found := ctx.env_info.arch(req.partition)):
        arch, rule = found, "internal-env-info"
    elif req.execution_scenario == "local_slurm":
        arch, rule = ctx.machine(), "uname -m (partition arch unknown)"
    elif device:
        arch = "x86_64"
        rule = f"default for remote_slurm (partition arch unknown; device_type {device})"
    else:
        ctx.trace.warn(
            f"architecture of partition {req.partition} is unknown (slurm_env arch is null, "
            "no device_type, no internal-env-info): using the x86_64 image; pass device_type "
            "or container_image if the nodes are Arm"
        )
        arch, rule = "x86_64", "default for remote_slurm (partition arch unknown)"
    return ctx.trace.chose("arch", normalize_arch(arch), rule)


def resolve_image(ctx: Context) -> str:
    """The image as the script uses it: enroot's ``REGISTRY#IMAGE`` for pyxis
    (Slurm, submit.py), Docker's ``REGISTRY/IMAGE`` for ``docker run``."""
    chosen = _chosen_image(ctx)
    ref = parse_image(chosen)
    source = "container_image" if ctx.request.container_image else "the properties file image"
    # a space is the one printable character that is white space
    if not ref.name or " " in chosen or not chosen.isprintable():
        raise BuildError(
            f"{source} {chosen!r} is not an image reference; write it as [REGISTRY/]IMAGE[:TAG]"
            " (or REGISTRY#IMAGE[:TAG]), without spaces or control characters"
        )
    if ctx.is_slurm:
        form, rule = ref.enroot, "enroot form for pyxis --container-image (REGISTRY#IMAGE)"
        problem = enroot_problem(ref)
        fault = f"cannot be pulled by pyxis: {problem}; fix the image name" if problem else ""
    else:
        form, rule = ref.docker, "Docker form for docker run (REGISTRY/IMAGE)"
        fault = "is a squashfs file, which docker run cannot use; pass a registry image"
        fault = fault if ref.file else ""
        if form.startswith("-"):
            fault = "would be read by docker run as an option; pass [REGISTRY/]IMAGE[:TAG]"
    if fault:
        raise BuildError(f"{source} {chosen!r} {fault}")
    if form != chosen:
        ctx.trace.chose("docker_image", form, rule)
    return form


def _chosen_image(ctx: Context) -> str:
    req = ctx.request
    if req.container_image:
        return ctx.trace.chose("docker_image", req.container_image, "container_image input")
    if not req.repo_root:
        raise BuildError(
            "container_image: not given and repo_root is not set to find the image tags "
            "properties file; pass container_image or repo_root"
        )
    props_file = find_properties_file(req.repo_root)
    if props_file is None:
        raise BuildError(
            f"container_image: not given and no image tags properties file under {req.repo_root}"
            " (expected jenkins/current_image_tags.properties); pass container_image"
        )
    arch = resolve_arch(ctx)
    key = ARCH_KEYS.get(arch)
    if key is None:
        raise BuildError(
            f"container_image: no properties key for architecture {arch!r} "
            f"(known: {', '.join(ARCH_KEYS)}); pass container_image"
        )
    image = image_for_arch(read_properties(props_file), arch)
    if not image:
        raise BuildError(f"container_image: {props_file} has no {key}= line; pass container_image")
    return ctx.trace.chose("docker_image", image, f"{key} in {props_file}")
