"""Procedure Step 1: the container image, and the architecture that selects it (the
scenario says which architecture and which image form: :mod:`scriptbuilder.scenarios`)."""

from __future__ import annotations

from collections.abc import Callable

from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.image_ref import ImageRef, parse_image
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


def chose_arch(ctx: Context, arch: str, rule: str) -> str:
    return ctx.trace.chose("arch", normalize_arch(arch), rule)


def partition_arch(ctx: Context) -> tuple[str, str] | None:
    """The partition's arch (slurm_env), else Arm for a Grace ``device_type``, else
    internal-env-info's answer, with the rule; None when none of them knows."""
    req, env = ctx.request, ctx.slurm_env
    part = env.partition(req.partition or "") if env else None
    device = (req.device_type or "").strip()
    if env is not None and not env.client_tools_missing and part and part.arch:
        return part.arch, f"slurm_env partition {part.name}"
    if device.upper().startswith(GRACE_PREFIXES):
        # Grace Blackwell / Grace Hopper nodes are Arm, as case-executor decides
        return "aarch64", f"device_type {device} (GB*/GH*: Grace, aarch64)"
    if ctx.env_info is not None and (found := ctx.env_info.arch(req.partition)):
        return found, "internal-env-info"
    return None


def chosen_image(ctx: Context, arch: Callable[[], str]) -> tuple[str, ImageRef, str]:
    """The image the request names or the properties file gives for ``arch()``
    (asked only then), parsed, and where it came from."""
    chosen = _chosen_image(ctx, arch)
    ref = parse_image(chosen)
    source = "container_image" if ctx.request.container_image else "the properties file image"
    # a space is the one printable character that is white space
    if not ref.name or " " in chosen or not chosen.isprintable():
        raise BuildError(
            f"{source} {chosen!r} is not an image reference; write it as [REGISTRY/]IMAGE[:TAG]"
            " (or REGISTRY#IMAGE[:TAG]), without spaces or control characters"
        )
    return chosen, ref, source


def image_in_form(
    ctx: Context, chosen: tuple[str, ImageRef, str], form: str, rule: str, fault: str
) -> str:
    """``form``, the chosen image as the scenario runs it; ``fault`` (non-empty)
    says why that cannot work."""
    image, _, source = chosen
    if fault:
        raise BuildError(f"{source} {image!r} {fault}")
    if form != image:
        ctx.trace.chose("docker_image", form, rule)
    return form


def _chosen_image(ctx: Context, resolve_arch: Callable[[], str]) -> str:
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
    arch = resolve_arch()
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
