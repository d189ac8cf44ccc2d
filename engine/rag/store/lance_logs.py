"""LanceDB's Rust logger: errors only, unless the user set LANCEDB_LOG.

LanceDB 0.40 warns on every search that selects columns without `_distance` or
`_score` (a coming change of default its Python API cannot opt into yet), two or
three lines per question, which would fill the engine log and the terminal.
"""

from __future__ import annotations

import os


def quiet_lancedb_logs() -> None:
    """Call before lancedb is imported: its Rust side reads LANCEDB_LOG once."""
    os.environ.setdefault("LANCEDB_LOG", "error")
