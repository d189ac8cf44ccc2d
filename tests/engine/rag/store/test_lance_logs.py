"""LanceDB's per-search deprecation warnings stay out of the logs."""

from __future__ import annotations

import os
import subprocess
import sys

_SEARCH = """
import tempfile
from engine.rag.store.lance_logs import quiet_lancedb_logs
quiet_lancedb_logs()
import lancedb
db = lancedb.connect(tempfile.mkdtemp())
t = db.create_table("t", data=[{"id": str(i), "vector": [float(i % 7), 1.0]} for i in range(50)])
t.search([1.0, 1.0]).select(["id"]).limit(3).to_arrow()
print("searched")
"""


def test_a_search_prints_no_lancedb_warnings() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LANCEDB_LOG"}
    done = subprocess.run(
        [sys.executable, "-c", _SEARCH], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "searched" in done.stdout
    assert "WARN" not in done.stderr
