from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import ParseError
from engine.rag.ingest.parsers import parse_file


def reason(path: Path) -> str:
    with pytest.raises(ParseError) as caught:
        parse_file(path=path)
    return caught.value.reason


def flat(text: str) -> str:
    return " ".join(text.split())
