"""Per-test records of a pytest step: the plugin it loads and where its records go.

A step marked ``records`` (the pytest workflow's test step) runs, inside the
container and before its command, three exports: ``SB_TEST_RECORDS`` (the records
file), ``PYTHONPATH`` led by the folder of the plugin file and ``PYTEST_ADDOPTS``
led by ``-p sb_test_records``, so whatever pytest the command starts (``pytest``,
``python -m pytest``, a script calling ``pytest.main``) loads the plugin
(``scriptbuilder/data/sb_test_records.py``). The scenario names the folder: the
job's log folder, where the build ships the plugin (an extra file) and the job
writes its records (job_spec.json ``test_records``, ``%j`` the job id); it is
mounted into the container as itself when no other mount holds it.
"""

from __future__ import annotations

from scriptbuilder.errors import BuildError
from scriptbuilder.resolution.mounts import covered
from scriptbuilder.script.plan import Step
from scriptbuilder.script.tree import Export, Statement, Var, Word
from scriptbuilder.workflows.pytest_workflow import PLUGIN_MODULE

RECORDS_VAR = "SB_TEST_RECORDS"
RECORDS_EXT = "tests.jsonl"


def records_pattern(folder: str, name: str, job_id: bool) -> str:
    """``<folder>/<name>[_%j].tests.jsonl``: job_spec.json's ``test_records``."""
    return f"{folder.rstrip('/')}/{name}{'_%j' if job_id else ''}.{RECORDS_EXT}"


def exports(step: Step, folder: str, records: Word) -> tuple[Statement, ...]:
    """The exports that turn recording on, to run first in ``step`` (none when it
    does not record)."""
    if not step.records:
        return ()
    return (
        Export(RECORDS_VAR, records),
        Export("PYTHONPATH", Word.of(folder.rstrip("/") or "/", Var("PYTHONPATH", joiner=":"))),
        Export("PYTEST_ADDOPTS", Word.of(f"-p {PLUGIN_MODULE}", Var("PYTEST_ADDOPTS", joiner=" "))),
    )


def with_folder(entries: tuple[str, ...], folder: str) -> tuple[str, ...]:
    """The ``host:container`` mounts, with ``folder`` mounted as itself unless one
    already holds it."""
    if covered(folder, [entry.split(":", 1)[0] for entry in entries]):
        return entries
    if any(char in folder for char in ",:\n"):
        raise BuildError(
            f"log folder {folder!r} cannot be mounted for the test records: pyxis and "
            "docker read SRC:DST[:FLAGS] entries, comma-separated; use a work_dir without "
            "commas, colons or newlines, or one inside repo_root"
        )
    return (*entries, f"{folder}:{folder}")
