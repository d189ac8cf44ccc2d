"""Text from files and documents, made safe to show on a terminal or in a table.

A questions file or a document may hold control characters and terminal escape
sequences (`ESC[2J` clears the screen, others retitle the window or move the
cursor), or bidirectional overrides that make text read differently than it is.
Each is shown as its escape (`\\x1b`, `\\u202e`) instead: visible, and inert."""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls, and the bidirectional embeddings/overrides/isolates.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str, *, keep: str = "") -> str:
    """`text` with every control character except those in `keep` written as its
    escape; the rest unchanged."""

    def escape(match: re.Match[str]) -> str:
        ch = match.group()
        if ch in keep:
            return ch
        code = ord(ch)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROLS.sub(escape, text)
