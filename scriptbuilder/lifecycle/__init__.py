"""The job's life after the build: submit, status, watch, cancel, verdict.

``submit(work_dir)`` submits what the last build wrote there and returns a
:class:`Run` (``status()``, ``wait(timeout=...)``, ``cancel()``);
``open_run(work_dir)`` finds the submitted run again from ``run.json``.
"""

from __future__ import annotations

from scriptbuilder.lifecycle.errors import LifecycleError
from scriptbuilder.lifecycle.run import Run, Status, open_run, submit
from scriptbuilder.lifecycle.verdict import EXIT_CODES, NOT_FINISHED, Verdict

__all__ = [
    "EXIT_CODES",
    "NOT_FINISHED",
    "LifecycleError",
    "Run",
    "Status",
    "Verdict",
    "open_run",
    "submit",
]
