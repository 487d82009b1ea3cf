"""String types shared by the models: ``OneLine`` (no newline, carriage return or NUL, which
would cut a ``#SBATCH`` line or a path) and ``Text`` (commands); neither takes a lone surrogate.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StringConstraints
from pydantic_core import PydanticCustomError

#: Pydantic also refuses lone surrogates for a string with a pattern.
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
