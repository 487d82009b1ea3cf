"""The lifecycle's one error type: ``str()`` is the one-line message (what, and the fix).

:class:`TransportError` (a command could not be run at all), :class:`SlurmError` (a
Slurm command failed) and :class:`UnknownJob` (Slurm knows no such job) are kinds
of it, for the callers that tell them apart.
"""

from __future__ import annotations


class LifecycleError(Exception):
    """A run that cannot go on (``exit_code``: the command's exit status, 2 unless said)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class TransportError(LifecycleError):
    """A command could not be run at all (missing tool, unreachable host, time-out)."""


class SlurmError(LifecycleError):
    """A Slurm command failed (the message names it and what it said)."""


class UnknownJob(SlurmError):
    """squeue, sacct and scontrol all know no such job (it ended long ago, no accounting)."""
