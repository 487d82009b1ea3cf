"""Errors that stop a build: one line naming the field and the fix."""

from __future__ import annotations


class BuildError(Exception):
    """A request that cannot be turned into a script. ``str()`` is the one-line message."""

    exit_code = 2
