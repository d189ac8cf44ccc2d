"""The same answer stated in another file, for `ragdoll bench conversation`.

The corpus holds the bash documentation twice: the Bash Reference Manual (bashref.pdf)
and the bash manual page (bash-manpage.pdf) share most of their text. A conversation's
key names the page of one of them; a follow-up whose top 3 holds the other manual's
page stating the same answer has served the person as well, and the strict count
misses it. conversation_also.json lists, for every conversation about either manual,
the other manual's pages that state the follow-up's answer (possibly none), with the
phrase matched there: found by a helper who read the keyed page, took the sentence
answering the follow-up, and matched a phrase of it on the other PDF's page text, blind
to the bench's results (71 of the 77 have such a page). Four pages the helper itself
called the most doubtful (a FILES list or an option entry that states the answer only
in part) were left out. The bench reports both counts; the strict one is the headline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ALSO_FILE = Path(__file__).with_name("conversation_also.json")


@dataclass(frozen=True, kw_only=True)
class Place:
    """Pages of a file (by name) that state an answer."""

    file: str
    pages: tuple[int, ...]


def load_also(path: Path = ALSO_FILE) -> dict[tuple[str, str], tuple[Place, ...]]:
    """(first question, follow-up) -> the other places stating the follow-up's answer."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    return {
        (r["first"], r["follow_up"]): (
            (Place(file=r["other"], pages=tuple(r["other_pages"])),) if r["other_pages"] else ()
        )
        for r in rows
    }


def found_also(*, row: Mapping[str, Any], also: Mapping[tuple[str, str], Sequence[Place]]) -> bool:
    """Whether a bench row found its follow-up's answer: on its keyed page, or on a page
    of `also` among its top sources ("file p.N", as the row lists them)."""
    if row["found"]:
        return True
    places = also.get((row["first"], row["follow_up"]), ())
    for where in row["top"]:
        name, _, page = where.partition(" p.")
        if any(p.file == name and page.isdigit() and int(page) in p.pages for p in places):
            return True
    return False
