"""String types shared by the models.

``OneLine`` is for values that end up on a ``#SBATCH`` line or in a path: a
newline, carriage return or NUL there would cut the line or the path, so they
are refused. ``Text`` is for user commands, which may span lines; both refuse a
lone surrogate, which no file or terminal can carry.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StringConstraints
from pydantic_core import PydanticCustomError

#: No line break, carriage return or NUL (pydantic also refuses lone surrogates
#: for a string with a pattern).
ONE_LINE_PATTERN = r"^[^\r\n\x00]*$"


def _encodable(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PydanticCustomError(
            "string_unicode", "holds a lone surrogate, which is not text"
        ) from None
    return value


OneLine = Annotated[str, StringConstraints(pattern=ONE_LINE_PATTERN)]
Text = Annotated[str, AfterValidator(_encodable)]
