"""What the job's logs say, read in bounded pieces (a log can be gigabytes).

Only the end of ``.out`` (and the start and end of ``.err``) is ever read: the
pytest summary line, the closing line and the hang detector's line are all near
the end, and excerpts are the last lines anyway.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from scriptbuilder.lifecycle.transport import Transport
from scriptbuilder.resolution.secrets import mask

TAIL_BYTES = 256 * 1024
HEAD_BYTES = 64 * 1024
HANG = re.compile(r"hang detected", re.IGNORECASE)
_OUTCOME = r"\d+ (?:passed|failed|skipped|deselected|xfailed|xpassed|warnings?|errors?|rerun)"
# pytest's last line, e.g. "==== 1 failed, 2 passed in 3.02s ====" (srun -l puts "0: " first)
_SUMMARY_LINE = re.compile(
    rf"^(?:\d+: )?=*\s*(?P<body>{_OUTCOME}(?:, {_OUTCOME})*|no tests ran) in [\d.]+s\b",
    re.MULTILINE,
)
_COUNT = re.compile(r"(\d+) (\w+)")


def text_of(data: bytes | None, limit: int | None = None) -> str:
    """``data`` as text; a tail read that filled ``limit`` loses its first (partial) line."""
    if data is None:
        return ""
    if limit is not None and len(data) >= limit:
        data = data.partition(b"\n")[2]
    return data.decode("utf-8", "replace")


def last_lines(text: str, count: int) -> list[str]:
    lines = text.splitlines()
    return lines[-count:] if count else []


def pytest_summary(text: str) -> dict[str, int] | None:
    """Counts of pytest's last summary line (``3 passed, 1 skipped in 2.1s``:
    ``{"passed": 3, "skipped": 1}``; ``no tests ran in 0.1s``: ``{}``), or None."""
    found = None
    for found in _SUMMARY_LINE.finditer(text):  # noqa: B007 - the last one counts
        pass
    if found is None:
        return None
    counts: dict[str, int] = {}
    for number, word in _COUNT.findall(found.group("body")):
        key = {"error": "errors", "warning": "warnings"}.get(word, word)
        counts[key] = counts.get(key, 0) + int(number)
    return counts


@dataclass
class LogView:
    """The bounded view of one run's logs."""

    out_path: str | None
    err_path: str | None
    out_tail: str = ""
    err_head: str = ""
    err_tail: str = ""

    @property
    def hang(self) -> bool:
        return any(HANG.search(t) for t in (self.out_tail, self.err_tail))

    def last_line(self) -> str:
        lines = [line for line in self.out_tail.splitlines() if line.strip()]
        return lines[-1].strip()[:200] if lines else ""

    def excerpt(self, failed: bool) -> dict[str, list[str]]:
        """The last 100 lines of ``.out``; on failure also the first and last 50 of ``.err``."""
        parts = {"out_last_100": last_lines(self.out_tail, 100)}
        if failed and self.err_path and self.err_path != self.out_path:
            parts["err_first_50"] = self.err_head.splitlines()[:50]
            parts["err_last_50"] = last_lines(self.err_tail, 50)
        return parts


def read_logs(
    transport: Transport, out_path: str | None, err_path: str | None, secrets: Sequence[str] = ()
) -> LogView:
    """The bounded view of the logs, with ``secrets`` shown as ``***``."""
    secrets = tuple(secrets)
    view = LogView(out_path, err_path)
    if out_path:
        view.out_tail = mask(
            text_of(transport.read_tail(out_path, TAIL_BYTES), TAIL_BYTES), secrets
        )
    if err_path and err_path != out_path:
        view.err_head = mask(text_of(transport.read_head(err_path, HEAD_BYTES)), secrets)
        view.err_tail = mask(
            text_of(transport.read_tail(err_path, TAIL_BYTES), TAIL_BYTES), secrets
        )
    return view


def matched(text: str, patterns: list[str]) -> list[str]:
    """The patterns (plain text, as the executors grep them) found in ``text``."""
    return [p for p in patterns if p and p in text]
