"""The quick form of `ragdoll bench retrieval` (bench/retrieval.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench import retrieval


def _args(tmp_path: Path, **overrides: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    retrieval.add_arguments(parser)
    args = parser.parse_args(["--dir", str(tmp_path)])
    args.quick, args.json, args.out = True, True, None
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


def test_quick_bench_reports_the_figures(tmp_path: Path) -> None:
    figures = retrieval.run(_args(tmp_path, rows=12_000, dim=64))
    assert figures["rows"] == 12_000 and figures["index_kind"] == "IVF_SQ"
    assert isinstance(figures["recall_at_10"], float)
    assert figures["recall_at_10"] >= 0.9  # exact re-ranking over probed partitions
    assert set(figures["p95_ms_by_budget"]) == {"5%", "25%", "100%"}
    assert all(v > 0 for v in figures["p95_ms_by_budget"].values())
    assert isinstance(figures["batch64_speedup"], float) and figures["batch64_speedup"] > 0
    # The store's IVF view answers (LanceDB's multi-vector query is measured beside it).
    view = figures["view"]
    assert view["rows"] == 12_000 and view["partitions"] == 3 and view["bytes"] > 0
    assert figures["batch64_speedup_lancedb"] > 0 and figures["batch64"]["fts64_ms"] > 0
    budgets = figures["budget_bytes_by_budget"]
    for share, resident in figures["resident_bytes_by_budget"].items():
        assert 0 < resident <= budgets[share]
    assert not any(tmp_path.iterdir())  # the table is removed afterwards


@pytest.mark.slow
def test_full_form_at_a_quarter_million(tmp_path: Path) -> None:
    figures = retrieval.run(_args(tmp_path, quick=False, rows=250_000, kinds="IVF_SQ"))
    assert figures["recall_at_10"] >= 0.95
