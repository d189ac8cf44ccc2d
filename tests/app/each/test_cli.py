"""`ragdoll ask --each` and POST /v1/ask/each against a real engine process over
real PDFs (LanceDB on disk, PDFium, the HTTP server on loopback)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from engine.errors import EngineRequestError
from engine.wire_each import EachRequest, FinishedEvent, PlanEvent, RowEvent
from tests.engine.rag.each.corpus import LICENCES, QUESTION
from tests.support.engine import RunningEngine


def test_the_api_streams_a_row_per_document(each_engine: RunningEngine) -> None:
    events = list(
        each_engine.client.ask_each_stream(
            request=EachRequest(question=QUESTION, scope="reports", reuse=False)
        )
    )
    assert isinstance(events[0], PlanEvent) and isinstance(events[-1], FinishedEvent)
    rows = {Path(e.row.path).stem: e.row for e in events if isinstance(e, RowEvent)}
    assert set(rows) == set(LICENCES)
    for name, (licence, page) in LICENCES.items():
        row = rows[name]
        assert all(c.path == row.path for c in row.citations)
        if licence is None:
            assert row.status == "not_stated"
        else:
            assert row.status == "answered" and row.first_page == page


def test_the_api_refuses_a_scope_that_names_nothing(
    each_engine: RunningEngine, tmp_path: Path
) -> None:
    with pytest.raises(EngineRequestError) as caught:
        list(
            each_engine.client.ask_each_stream(
                request=EachRequest(question=QUESTION, scope="no such collection")
            )
        )
    assert caught.value.status == 400 and "neither a collection" in str(caught.value)


def test_the_cli_writes_the_table_and_a_rerun_reuses_it(
    each_engine: RunningEngine, reports_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "licences.csv"
    first = each_engine.ragdoll(
        "ask", "--each", str(reports_dir), QUESTION, "--out", str(out), "--fresh"
    )
    assert first.returncode == 0, first.stderr
    assert "4 answered, 2 not stated" in first.stderr and f"[6/{len(LICENCES)}]" in first.stderr
    with out.open(encoding="utf-8-sig", newline="") as f:
        rows = {Path(r["path"]).stem: r for r in csv.DictReader(f)}
    assert rows["bees"]["status"] == "answered" and rows["bees"]["pages"].startswith("2")
    assert "MIT" in rows["bees"]["answer"]
    assert rows["bread"]["status"] == "not stated" and rows["bread"]["pages"] == ""
    again = each_engine.ragdoll("ask", "--each", str(reports_dir), QUESTION)
    assert again.returncode == 0, again.stderr
    assert "6 from the last run" in again.stderr
    assert again.stdout.startswith("**Question:** " + QUESTION)
    assert "| bees.pdf |" in again.stdout and "*Not stated in this document.*" in again.stdout


def test_the_cli_names_a_bad_scope_and_asks_nothing(each_engine: RunningEngine) -> None:
    result = each_engine.ragdoll("ask", "--each", "nowhere-at-all", QUESTION)
    assert result.returncode == 2
    assert "neither a collection" in result.stderr and result.stdout == ""


def test_whole_documents_without_a_model_are_refused_clearly(
    each_engine: RunningEngine, reports_dir: Path
) -> None:
    result = each_engine.ragdoll("ask", "--each", str(reports_dir), QUESTION, "--whole-document")
    assert result.returncode == 2
    assert "need a language model" in result.stderr and result.stdout == ""
