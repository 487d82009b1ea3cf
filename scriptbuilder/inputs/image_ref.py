"""Container image references in the two spellings their readers understand.

- Docker (``docker run``, the properties file, the orchestrator):
  ``[REGISTRY/]IMAGE[:TAG][@DIGEST]``.
- enroot, behind pyxis's ``srun --container-image`` (and submit.py's ``--image``,
  which lands there): ``[USER@][REGISTRY#]IMAGE[:TAG]``, or a squashfs file
  whose path starts with ``/`` or ``./``. enroot reads a registry written with
  ``/`` as part of a Docker Hub repository name, and the pull fails.

A first path component is a registry host when it contains ``.`` or ``:`` or
is ``localhost``. Either spelling converts to the other; converting a value
already in the target spelling returns it unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ImageRef",
    "docker_form",
    "enroot_form",
    "enroot_problem",
    "is_registry_host",
    "parse_image",
]

# ``name@sha256:...``: the part after ``@`` is a digest, not the image.
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}")
# What enroot accepts after the registry: IMAGE in lower case, digits and "/._-",
# then an optional :TAG (no digest).
_ENROOT_NAME = re.compile(r"[a-z0-9/._-]+(?::[A-Za-z0-9._:-]+)?")


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
    """An enroot ``USER@`` prefix: text before the first ``@`` holding no ``/`` or
    ``#``, unless what follows the ``@`` is a digest (``ubuntu@sha256:...``)."""
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
