"""What the guard checks in a request body before any route reads it.

JSON allows `"\\ud800"`, a lone UTF-16 surrogate, which is not text: it cannot be
encoded, logged or saved, so every route that takes text would fail on it (500) or,
worse, store it. One check here refuses it for all routes at once.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BeforeValidator


def invalid_text_at(body: bytes) -> str | None:
    """Where the JSON body holds a string that is not valid Unicode (a lone
    surrogate), as a path like `messages[0].content`; None when it holds none, or
    is not JSON at all (the route's own parser says so then)."""
    if not body.strip():
        return None
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or too deep: the route refuses it
        return None
    # Iterative: the depth of a body is the sender's choice.
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if not _is_text(item):
                return where or "(the body)"
        elif isinstance(item, dict):
            for key, child in item.items():
                path = f"{where}.{key}" if where else str(key)
                if not _is_text(key):
                    return f"{where or '(the body)'} (a key)"
                stack.append((path, child))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(item))
    return None


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _whole(value: object) -> object:
    """26.0 is an integer to JSON Schema (and so to the schema the engine serves)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# An int field of a strict body that also takes a float with no fraction (26.0), as
# the published schema's "integer" allows; 26.5, "26" and true are still refused.
WholeNumber = Annotated[int, BeforeValidator(_whole)]
