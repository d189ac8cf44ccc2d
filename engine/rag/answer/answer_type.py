"""What kind of fact a question asks for, and which sentences hold one.

"Where does dpkg keep…", "which variable…", "which option…" ask for a path, a
variable, an option: the sentence that answers holds one the question does not name
("…the shell variable FIGNORE is used…", "…upload to is ftp://…/SecurityUploadQueue/"),
while the sentence that merely repeats the question's words often holds none; "which
command" asks for a command line ("$ dpkg-buildpackage -us -uc"). The
extractive answerer (engine/rag/answer/extractive.py) adds `TYPE_BONUS` to the choice of
such a sentence; the relevance the gate reads is left as it was, so an unanswerable
question's sentences score no higher for holding a path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum

# Quality benchmark, tune + tune2 splits (docs/benchmarks.md, sixth round).
TYPE_BONUS = 0.15


class Kind(Enum):
    PATH = "path"
    VARIABLE = "variable"
    OPTION = "option"
    COMMAND = "command"


_ASKS = (
    (
        Kind.PATH,
        re.compile(
            r"\bwhere\b|\b(?:which|what)\s+(?:\w+\s+)?(?:files?|director(?:y|ies)|folders?|"
            r"paths?|urls?)\b",
            re.IGNORECASE,
        ),
    ),
    (Kind.VARIABLE, re.compile(r"\b(?:which|what)\s+(?:\w+\s+)?variables?\b", re.IGNORECASE)),
    (
        Kind.OPTION,
        re.compile(
            r"\b(?:which|what)\s+(?:[\w-]+\s+){0,2}(?:options?|flags?|switch(?:es)?)\b",
            re.IGNORECASE,
        ),
    ),
    (
        Kind.COMMAND,
        re.compile(
            r"\b(?:which|what)\s+(?:[\w-]+\s+){0,2}(?:commands?|programs?|tools?|"
            r"utilit(?:y|ies))\b",
            re.IGNORECASE,
        ),
    ),
)
_HOLDS = {
    # "/etc/profile", "~/.gbp.conf", "ftp://host/dir/", "foo.conf"; not "and/or".
    Kind.PATH: re.compile(
        r"(?:\b(?:https?|ftp)://\S+|(?<![\w/.~])(?:~|\.{1,2})?/[\w.+*-]+(?:/[\w.+*-]*)*"
        r"|\b[\w+-]+\.(?:conf|cfg|list|txt|gz|xz|bz2|deb|dsc|changes|sh|ini|json|xml|d)\b)"
    ),
    # "FIGNORE", "DH_VERBOSE", "$HOME": capitals and underscores, 3 or more.
    Kind.VARIABLE: re.compile(r"(?<![\w-])\$?[A-Z][A-Z0-9_]{2,}(?![\w-])"),
    # "--guess-dummy", "-P".
    Kind.OPTION: re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*"),
    # A command line after its prompt ("$ dpkg-buildpackage -us -uc"); a command's
    # name alone looks like any hyphenated word (tune2: counting those lost answers).
    Kind.COMMAND: re.compile(r"(?:(?<=\s)|^)[$#]\s+[a-z][\w.-]*"),
}


def asked_kinds(question: str) -> tuple[Kind, ...]:
    """The kinds of fact `question` asks for (most ask for none of these)."""
    return tuple(kind for kind, asks in _ASKS if asks.search(question))


def holds_asked(*, question: str, sentences: Sequence[str]) -> list[bool]:
    """For each sentence, whether it holds a token of a kind the question asks for
    that the question does not name itself."""
    kinds = asked_kinds(question)
    if not kinds:
        return [False] * len(sentences)
    named = question.lower()
    out = []
    for sentence in sentences:
        out.append(
            any(
                token.lower().rstrip(".,;:") not in named
                for kind in kinds
                for token in _HOLDS[kind].findall(sentence)
            )
        )
    return out
