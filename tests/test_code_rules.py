"""Rules of the code base that no behaviour test sees."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "scriptbuilder"


def test_type_checking_comes_from_typing() -> None:
    """``TYPE_CHECKING`` is typing's: a module-level ``TYPE_CHECKING = False`` only
    saved importing typing, which every entry point imports anyway (click does)."""
    fake = re.compile(r"^TYPE_CHECKING\s*=", re.MULTILINE)
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if fake.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
