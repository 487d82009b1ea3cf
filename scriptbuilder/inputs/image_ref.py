"""Container image references: Docker's ``[REGISTRY/]IMAGE[:TAG][@DIGEST]`` and enroot's
``[USER@][REGISTRY#]IMAGE[:TAG]`` (pyxis ``--container-image``; a ``/`` registry there is
read as a Docker Hub name and the pull fails), or a squashfs path. Converting a value
already in the target spelling returns it unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ``name@sha256:...``: a digest, not the image.
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}")
# What enroot accepts after the registry, and as the registry.
_ENROOT_NAME = re.compile(r"[a-z0-9/._-]+(?::[A-Za-z0-9._:-]+)?")
_HOST = re.compile(r"[A-Za-z0-9.-]+(?::[0-9]+)?")


def is_registry_host(component: str) -> bool:
    """``nvcr.io``, ``urm.nvidia.com``, ``host:5000``, ``localhost``; not ``nvidia``."""
    return "." in component or ":" in component or component == "localhost"


@dataclass(frozen=True)
class ImageRef:
    """One image: registry host (None = Docker Hub), ``IMAGE[:TAG]`` and the
    enroot ``USER@`` prefix; or a squashfs file (``file``)."""

    name: str
    registry: str | None = None
    user: str | None = None
    file: bool = False

    @property
    def docker(self) -> str:
        """``REGISTRY/IMAGE[:TAG]`` (Docker has no user prefix; it is dropped)."""
        if self.file or self.registry is None:
            return self.name
        return f"{self.registry}/{self.name}"

    @property
    def enroot(self) -> str:
        """``[USER@][REGISTRY#]IMAGE[:TAG]``, or the squashfs path as given."""
        if self.file:
            return self.name
        user = f"{self.user}@" if self.user is not None else ""
        registry = f"{self.registry}#" if self.registry is not None else ""
        return f"{user}{registry}{self.name}"


def _split_user(text: str) -> tuple[str | None, str]:
    """An enroot ``USER@`` prefix, unless what follows the ``@`` is a digest."""
    user, sep, rest = text.partition("@")
    if not sep or not user or "/" in user or "#" in user or _DIGEST.fullmatch(rest):
        return None, text
    return user, rest


def parse_image(text: str) -> ImageRef:
    """Read ``text`` in either spelling."""
    if text.startswith(("/", "./")):
        return ImageRef(text, file=True)
    user, rest = _split_user(text)
    registry, sep, name = rest.partition("#")
    if sep:
        return ImageRef(name, registry, user)
    first, sep, name = rest.partition("/")
    if sep and is_registry_host(first):
        return ImageRef(name, first, user)
    return ImageRef(rest, None, user)


def enroot_problem(ref: ImageRef) -> str | None:
    """Why enroot would refuse ``ref`` (its image grammar), or None."""
    if ref.file:
        return None
    if ref.registry is not None and not _HOST.fullmatch(ref.registry):
        return f"registry {ref.registry!r} is not HOST[:PORT]; write the image without docker://"
    if "@" in ref.name:
        return "enroot takes no @digest; use a tag"
    if not _ENROOT_NAME.fullmatch(ref.name):
        return "enroot reads IMAGE[:TAG] with IMAGE in lower-case letters, digits and '/._-'"
    return None


def enroot_form(text: str) -> str:
    """What pyxis's ``--container-image`` needs: ``nvcr.io/nvidia/x`` -> ``nvcr.io#nvidia/x``."""
    return parse_image(text).enroot


def docker_form(text: str) -> str:
    """What ``docker run`` needs: ``nvcr.io#nvidia/x`` -> ``nvcr.io/nvidia/x``."""
    return parse_image(text).docker
