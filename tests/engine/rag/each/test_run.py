"""Ask every document, in-process: a real engine over real PDFs (LanceDB on disk,
PDFium, MiniLM), extractive answers through the pipelines."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.rag.each.scope import ScopeError
from engine.service.core import Engine
from engine.wire_each import (
    NOT_STATED,
    DocumentAnswer,
    EachRequest,
    FinishedEvent,
    PlanEvent,
    RowEvent,
)
from tests.engine.rag.each.corpus import LICENCES, QUESTION, write_reports


def _wait(engine: Engine, job) -> None:  # type: ignore[no-untyped-def]
    version = 0
    while job.snapshot().state not in ("done", "failed", "cancelled"):
        version, _ = job.wait_next(after=version, timeout_s=1.0)
    assert job.snapshot().state == "done"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Path]]:
    from engine.paths import resolve_paths

    root = tmp_path_factory.mktemp("each")
    docs = root / "reports"
    write_reports(docs)
    engine = Engine(paths=resolve_paths(env={"RAGDOLL_HOME": str(root / "home")}), warm_up=False)
    try:
        _, job = engine.add_folder(path=str(docs), collection="reports")
        _wait(engine, job)
        yield engine, docs
    finally:
        engine.close()


def _rows(engine: Engine, **kw: object) -> tuple[list[DocumentAnswer], list[object]]:
    events = list(engine.each.stream(request=EachRequest(**kw)))  # type: ignore[arg-type]
    rows = sorted((e.row for e in events if isinstance(e, RowEvent)), key=lambda r: r.number)
    return rows, events


def test_each_document_is_answered_from_itself_alone(reports: tuple[Engine, Path]) -> None:
    engine, _ = reports
    rows, events = _rows(engine, question=QUESTION, scope="reports", reuse=False)
    assert isinstance(events[0], PlanEvent) and isinstance(events[-1], FinishedEvent)
    assert [Path(p).stem for p in events[0].plan.paths] == sorted(LICENCES)
    assert [r.number for r in rows] == list(range(1, len(LICENCES) + 1))
    for row in rows:
        name = Path(row.path).stem
        licence, page = LICENCES[name]
        # Never a passage of another document, whatever the row's outcome.
        assert all(c.path == row.path for c in row.citations), row
        if licence is None:
            assert row.status == "not_stated" and row.answer == NOT_STATED, row
            assert row.citations == []
        else:
            assert row.status == "answered" and row.mode == "extractive", row
            assert row.first_page == page, row
            assert "distributed under" in row.answer
    summary = events[-1].summary
    assert (summary.answered, summary.not_stated, summary.failed) == (4, 2, 0)


def test_a_folder_or_one_file_is_a_scope_too(reports: tuple[Engine, Path]) -> None:
    engine, docs = reports
    rows, _ = _rows(engine, question=QUESTION, scope=str(docs / "bees.pdf"), reuse=False)
    assert [Path(r.path).name for r in rows] == ["bees.pdf"]
    assert rows[0].first_page == 2
    rows, _ = _rows(engine, question=QUESTION, scope=str(docs), reuse=False)
    assert len(rows) == len(LICENCES)


def test_a_scope_that_names_nothing_is_refused_before_anything_is_asked(
    reports: tuple[Engine, Path], tmp_path: Path
) -> None:
    engine, _ = reports
    with pytest.raises(ScopeError, match="neither a collection"):
        engine.each.stream(request=EachRequest(question=QUESTION, scope=str(tmp_path)))
    with pytest.raises(ValueError, match="empty"):
        engine.each.stream(request=EachRequest(question="  ", scope="reports"))


def test_a_rerun_asks_again_only_the_document_that_changed(
    reports: tuple[Engine, Path],
) -> None:
    engine, docs = reports
    first, _ = _rows(engine, question=QUESTION, scope="reports")
    again, _ = _rows(engine, question=QUESTION, scope="reports")
    assert all(r.reused for r in again)
    assert [(r.answer, r.citations) for r in again] == [(r.answer, r.citations) for r in first]
    # bread.pdf now states a licence: only its row is answered again.
    from tests.fixtures.pdf_factory import PdfPage, write_pdf

    write_pdf(
        path=docs / "bread.pdf",
        pages=[
            PdfPage(paragraphs=["Knead the dough for ten minutes."]),
            PdfPage(paragraphs=["This document is distributed under the BSD licence."]),
        ],
    )
    _wait(engine, engine.start_ingest(paths=[str(docs / "bread.pdf")]))
    third, _ = _rows(engine, question=QUESTION, scope="reports")
    fresh = [Path(r.path).stem for r in third if not r.reused]
    assert fresh == ["bread"]
    bread = next(r for r in third if Path(r.path).stem == "bread")
    assert bread.status == "answered" and bread.first_page == 2
    # Another question is another answer: nothing reused.
    other, _ = _rows(engine, question="Who wrote this document?", scope="reports")
    assert not any(r.reused for r in other)


def test_cancel_keeps_the_rows_done_and_drops_the_rest(reports: tuple[Engine, Path]) -> None:
    engine, _ = reports
    cancel = threading.Event()
    events = engine.each.stream(
        request=EachRequest(question="How is the work organised?", scope="reports", reuse=False),
        cancel=cancel,
    )
    seen = []
    for event in events:
        seen.append(event)
        if isinstance(event, RowEvent) and event.row.status != "cancelled":
            cancel.set()  # after the first row
    rows = [e.row for e in seen if isinstance(e, RowEvent)]
    assert len(rows) == len(LICENCES)  # every document has its row, once
    assert len({r.number for r in rows}) == len(rows)
    assert isinstance(seen[-1], FinishedEvent)
    done = [r for r in rows if r.status != "cancelled"]
    assert done and all(r.status in ("answered", "not_stated") for r in done)


def test_whole_documents_go_to_the_model_where_they_fit_and_are_refused_where_not(
    tmp_path: Path,
) -> None:
    from engine.paths import resolve_paths
    from engine.runtime.models.synthetic import write_random_model

    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "short.txt").write_text("The shed is painted green every spring.\n")
    (docs / "long.txt").write_text(
        "\n\n".join(f"Paragraph {i}: the orchard has {i} apple trees." for i in range(400))
    )
    engine = Engine(paths=resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "h")}), warm_up=False)
    try:
        _, job = engine.add_folder(path=str(docs), collection="notes")
        _wait(engine, job)
        whole = EachRequest(
            question="What colour is the shed?",
            scope="notes",
            whole_document=True,
            max_new_tokens=16,
        )
        with pytest.raises(ValueError, match="need a language model"):
            engine.each.stream(request=whole)  # extractive: nothing to give it to
        model = write_random_model(folder=tmp_path / "tiny", max_position_embeddings=2048)
        engine.models.set_model(model=str(model))
        events = list(engine.each.stream(request=whole))
        rows = {Path(e.row.path).name: e.row for e in events if isinstance(e, RowEvent)}
        assert rows["long.txt"].status == "failed"
        assert "does not fit the model's context" in rows["long.txt"].error
        short = rows["short.txt"]
        assert short.status in ("answered", "not_stated"), short
        assert all(c.path == short.path for c in short.citations)
    finally:
        engine.close()
