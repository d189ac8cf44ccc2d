"""The whole product path with real parts: a real engine process, LanceDB on
disk, pypdf, the bundled embedder, and the `ragdoll` command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from resources import sample_collection_dir
from tests.fixtures.fact_corpus import FactQuestion, write_fact_corpus
from tests.support.engine import RunningEngine


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[FactQuestion]]:
    folder = tmp_path_factory.mktemp("corpus")
    return folder, write_fact_corpus(folder=folder)


@pytest.fixture(scope="module")
def loaded(shared_engine: RunningEngine, corpus: tuple[Path, list[FactQuestion]]) -> RunningEngine:
    folder, _ = corpus
    result = shared_engine.ragdoll("ingest", str(folder), str(sample_collection_dir()))
    assert result.returncode == 0, result.stdout + result.stderr
    return shared_engine


def _ask(engine: RunningEngine, question: str, k: int = 5) -> dict:
    result = engine.ragdoll("ask", question, "--json", "--k", str(k))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_cites_the_right_file_and_page(
    loaded: RunningEngine, corpus: tuple[Path, list[FactQuestion]]
) -> None:
    """Questions worded differently from the text; the right file and page must
    be among the first three citations. All misses are printed, and the bar is
    the issue's (at least 20 right) and at least 90% of the set."""
    _, questions = corpus
    assert len(questions) >= 20
    misses = []
    for q in questions:
        # Through the client rather than 33 `ragdoll ask` processes: the CLI's own
        # path is tested below, and 33 interpreter starts on a busy 2-core machine
        # took most of this test's time limit.
        answer = loaded.client.ask(question=q.question, k=5)
        top3 = [(os.path.basename(c.path), c.page) for c in answer.citations[:3]]
        if (q.file_name, q.page) not in top3:
            misses.append(f"{q.question!r}: wanted {(q.file_name, q.page)}, got {top3}")
    hits = len(questions) - len(misses)
    print(f"\nright file and page in the top 3: {hits}/{len(questions)}")
    print("\n".join(misses))
    assert hits >= 20 and hits >= 0.9 * len(questions), "\n".join(misses)


def test_answer_json_shape_and_extractive_note(loaded: RunningEngine) -> None:
    answer = _ask(loaded, "How do I add a folder of documents?", k=3)
    assert isinstance(answer["answer"], str) and answer["answer"]
    assert answer["mode"] == "extractive"
    assert "ragdoll model" in answer["note"]
    assert "[1]" in answer["answer"] or "[2]" in answer["answer"] or "[3]" in answer["answer"]
    assert 1 <= len(answer["citations"]) <= 3
    for c in answer["citations"]:
        assert {"path", "page", "text", "score"} <= set(c)
        assert c["page"] is None or c["page"] >= 1


def test_nothing_relevant_says_so(loaded: RunningEngine) -> None:
    answer = _ask(loaded, "What was the final score of the 1974 World Cup final in football?")
    assert answer["mode"] == "none"
    assert answer["citations"] == []
    assert answer["answer"].startswith("Not found in your documents")
    assert "May be related" in answer["answer"]  # named, not quoted or cited


def test_status_counts_documents(loaded: RunningEngine) -> None:
    status = loaded.client.status()
    assert status.documents >= 9
    assert status.chunks > status.documents


def test_reingest_of_unchanged_folder_embeds_nothing(
    loaded: RunningEngine, corpus: tuple[Path, list[FactQuestion]]
) -> None:
    folder, _ = corpus
    before = loaded.client.status().chunks
    progress = loaded.ingest(folder)
    assert progress.state == "done"
    assert progress.chunks_added == 0
    assert progress.files_skipped == progress.files_total
    assert loaded.client.status().chunks == before
