"""The two-turn conversation sets of `ragdoll bench conversation`, read from
bench/sets/conversations.json: over the real documents (bench/real_docs.py), the first
question stands alone; the second is a follow-up that means little without it ("and the
second one?"). `pages` are the pages (1-based, as the PDF numbers them) where the
follow-up's answer is; None for formats without pages. Each set's `written` field says
who wrote it, how, and what it was kept apart from; tuning sets and held-out sets are
reported apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

SETS_FILE = Path(__file__).with_name("sets") / "conversations.json"


@dataclass(frozen=True, kw_only=True)
class TwoTurns:
    file: str  # the follow-up's file, by name
    first: str
    follow_up: str
    pages: tuple[int, ...] | None  # None: a file without pages
    held_out: bool = False


def _row(row: dict[str, Any]) -> TwoTurns:
    pages = row["pages"]
    return TwoTurns(
        file=row["file"],
        first=row["first"],
        follow_up=row["follow_up"],
        pages=None if pages is None else tuple(pages),
        held_out=bool(row.get("held_out", False)),
    )


def _read() -> tuple[tuple[str, ...], Mapping[str, tuple[TwoTurns, ...]], tuple[str, ...]]:
    data = json.loads(SETS_FILE.read_text(encoding="utf-8"))
    sets = {
        name: tuple(_row(r) for r in part["rows"])
        for name, part in data["sets"].items()
        if name != "STANDALONE3"
    }
    standalone = tuple(data["sets"]["STANDALONE3"]["rows"])
    return tuple(data["files"]), MappingProxyType(sets), standalone


# FILES: the files the questions are about (the benchmark indexes the rest of the corpus
# too). STANDALONE3: questions that stand alone although they look like follow-ups.
FILES, SETS, STANDALONE3 = _read()
CONVERSATIONS = SETS["CONVERSATIONS"]
TUNING2 = SETS["TUNING2"]
HELD_OUT2 = SETS["HELD_OUT2"]
TUNING3 = SETS["TUNING3"]
TUNING4 = SETS["TUNING4"]
SWITCHES4 = SETS["SWITCHES4"]
TUNING5 = SETS["TUNING5"]
HELD_OUT3 = SETS["HELD_OUT3"]
HELD_OUT4 = SETS["HELD_OUT4"]
HELD_OUT5 = SETS["HELD_OUT5"]
HELD_OUT6 = SETS["HELD_OUT6"]
HELD_OUT7 = SETS["HELD_OUT7"]
HELD_OUT8 = SETS["HELD_OUT8"]
