"""Hand-written standalone rewrites of follow-ups, for `ragdoll bench conversation`: how
far a perfect rewrite of a follow-up gets the search.

A follow-up is resolved before retrieval (engine/rag/answer/conversation.py): without a
model by history-aware search, with one by the model's rewrite too. Neither can do
better than a person who writes the follow-up out in full ("What about the copyright
one?" after "What goes into the debian/control file?" -> "What goes into the
debian/copyright file?") and searches that alone; when even that misses the page, the
follow-up's resolution is not what loses it, the search is.

conversation_rewrites.json holds one rewrite for every follow-up of the tuning parts
(switches excepted: they stand alone) and of the spent held-out sets held_out5 and
held_out6, each written by a helper from the two questions only: no answer, no document
and no benchmark result was read; what the first question leaves unnamed stays
unnamed (no tool's name is supplied from the writer's own knowledge).
"""

from __future__ import annotations

import json
from pathlib import Path

REWRITES_FILE = Path(__file__).with_name("conversation_rewrites.json")


def load_rewrites(path: Path = REWRITES_FILE) -> dict[tuple[str, str], str]:
    """(first question, follow-up) -> the follow-up written out in full."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    return {(r["first"], r["follow_up"]): r["rewrite"] for r in rows}
