"""The Engine object in-process: how its parts share one plan, and every answer
through the two pipelines (batched, prioritised, re-placed without losing anything)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.rag.answer.refusal import MIN_CHUNKS
from engine.rag.pipeline.status import WorkerStatus
from engine.service.core import NOT_FOUND_ANSWER, Engine
from engine.service.model_choice import ModelChoice
from engine.wire import AnswerEvent, CitationsEvent, DoneEvent, TokenEvent


def _added(engine: Engine, docs: Path) -> str:
    """`docs` added as a watched folder, once its first ingestion ends: how it ended."""
    _, job = engine.add_folder(path=str(docs))
    version = 0
    while job.snapshot().state not in ("done", "failed", "cancelled"):
        version, _ = job.wait_next(after=version, timeout_s=1.0)
    return job.snapshot().state


def test_choosing_a_model_gives_the_index_its_resident_budget_from_the_same_plan(
    tmp_path: Path,
) -> None:
    from engine.paths import resolve_paths
    from engine.runtime.models.synthetic import write_random_model
    from engine.service.core import Engine

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.txt").write_text("The greenhouse is watered every morning at six.")
    model = write_random_model(folder=tmp_path / "tiny-llama", architecture="llama")
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    engine = Engine(paths=paths, warm_up=False)
    try:
        _added(engine, docs)
        engine.models.set_model(model=str(model))
        placement = engine.placement()
        assert placement is not None and placement.resident_partition_bytes > 0
        assert engine.store.resident_budget == placement.resident_partition_bytes
    finally:
        engine.close()


# -- every answer through the two pipelines (issue #6) ---------------------------------

FACTS = {
    "boiler.txt": "The boiler pressure must stay between 1.2 and 1.5 bar during heating.",
    "lease.txt": "The office lease ends on 31 March 2027 and renews for five years.",
    "payroll.txt": "Salaries are paid on the twenty-fifth day of every month by transfer.",
    "garden.txt": "Tomatoes need watering every morning in July and August.",
    "car.txt": "The car's tyres should be inflated to 2.3 bar at the front.",
    "library.txt": "The town library opens at nine and closes at six on Saturdays.",
    # Same topic as car.txt, another file type: a per-question type filter picks it.
    "van.md": "The van's tyres should be inflated to 3.1 bar at the front.",
}
QUESTIONS = {
    "What pressure should the boiler have?": ("boiler.txt", "1.2 and 1.5 bar"),
    "When does the office lease end?": ("lease.txt", "31 March 2027"),
    "When are salaries paid?": ("payroll.txt", "twenty-fifth"),
    "How often should tomatoes be watered?": ("garden.txt", "every morning"),
    "When does the library close on Saturday?": ("library.txt", "closes at six"),
}
UNRELATED = "What is the airspeed of a swallow over Jupiter?"


@pytest.fixture(scope="module")
def local_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """An in-process engine over the facts above (LanceDB on disk, MiniLM), extractive
    until a test chooses the random-weight model (and chooses none again after)."""
    from engine.paths import resolve_paths

    root = tmp_path_factory.mktemp("core")
    docs = root / "docs"
    docs.mkdir()
    for name, text in FACTS.items():
        (docs / name).write_text(text + "\n", encoding="utf-8")
    engine = Engine(paths=resolve_paths(env={"RAGDOLL_HOME": str(root / "home")}), warm_up=False)
    try:
        assert _added(engine, docs) == "done"
        yield engine
    finally:
        engine.close()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engine.runtime.models.synthetic import write_random_model

    return write_random_model(folder=tmp_path_factory.mktemp("model") / "tiny-llama")


@pytest.fixture
def with_model(local_engine: Engine, tiny_model: Path) -> Iterator[Engine]:
    local_engine.models.set_model(model=str(tiny_model))
    # The tests below set the placement themselves: the engine's own re-planning (from
    # a backlog held for seconds) would change it under them on a slow machine.
    governor = local_engine.serving().governor
    assert governor is not None
    governor.close()
    try:
        yield local_engine
    finally:
        local_engine.models.set_model(model=None)


def _join(
    threads: list[threading.Thread],
    results: list[list[AnswerEvent]],
    errors: list[BaseException],
) -> list[list[AnswerEvent]]:
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "an answer never finished"
    assert not errors, errors
    return results


def _until(condition: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _queued_or_joined(status: WorkerStatus) -> bool:
    """The second question waits for the batch in flight, or runs in it."""
    return status.queue_length == 1 or status.running == 2


def _start(engine: Engine, asks: list[dict[str, Any]]) -> tuple[list[threading.Thread], Any, Any]:
    results: list[list[AnswerEvent]] = [[] for _ in asks]
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            results[i] = list(engine.ask_stream(**asks[i]))
        except BaseException as e:  # reported by the test thread
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(asks))]
    for t in threads:
        t.start()
    return threads, results, errors


def test_concurrent_questions_share_batches_and_each_gets_its_own_answer(
    local_engine: Engine,
) -> None:
    pipeline = local_engine.serving().pipeline
    asks: list[dict[str, Any]] = [{"question": q} for q in QUESTIONS]
    asks.append({"question": UNRELATED})
    # Same words, two folders' worth of file types: the filter decides per question.
    asks.append({"question": "What tyre pressure is needed at the front?", "types": ("md",)})
    before = pipeline.status()
    # Hold the retrieval worker until every question waits: one batch for all of them.
    # Each question goes on to generation at its own verdict, so the generation worker
    # is held too until every answered one waits there: one batch for those.
    with pipeline.generation.paused():
        with pipeline.retrieval.paused():
            threads, results, errors = _start(local_engine, asks)
            _until(lambda: pipeline.retrieval.status().queue_length == len(asks))
        _until(lambda: pipeline.generation.status().queue_length == len(asks) - 1)
    _join(threads, results, errors)

    for (question, (file, words)), events in zip(QUESTIONS.items(), results, strict=False):
        citations, done = events[0].citations, events[-1].done
        assert [e.name for e in events] == ["citations", "token", "done"], question
        assert citations[0].path.endswith(file), question
        assert done.mode == "extractive" and words in done.answer, question
    unrelated = results[len(QUESTIONS)]
    assert unrelated[0] == CitationsEvent(citations=[])
    assert unrelated[-1].done.mode == "none" and unrelated[-1].done.answer.startswith(
        NOT_FOUND_ANSWER
    )
    van = results[-1]
    assert {Path(c.path).name for c in van[0].citations} == {"van.md"}
    assert "3.1 bar" in van[-1].done.answer

    info = local_engine.status().pipeline
    assert info is not None
    retrieval = [b for b in info.batches if b.worker == "retrieval"][-1]
    assert retrieval.size == len(asks) and retrieval.backlog == len(asks)
    # The unrelated question was settled at retrieval: generation saw the others only.
    generated = [b for b in info.batches if b.worker == "generation"]
    assert (
        sum(b.size for b in generated) - sum(b.size for b in before.generation.recent)
        == len(asks) - 1
    )
    assert max(b.size for b in generated) > 1
    assert info.finished == info.submitted
    assert info.placement.startswith("extractive")
    latest = info.requests[-len(asks) :]
    assert all(r.status == "done" and r.latency_s > 0 and r.tokens == 0 for r in latest)


def _the_model_s_words(engine: Engine, *, streamed: str, alone: str, passages: list[str]) -> bool:
    """Whether `streamed` is the model's words `alone`, made final: markers checked
    against `passages` and, a random model's words being borne out by none, perhaps
    followed by the sources' sentences (engine/rag/answer/written_answer.py)."""
    from engine.rag.answer.written_answer import finish_written

    checked = finish_written(
        answer=alone,
        passages=passages,
        embed=engine.in_force.embed_sentences,
        fallback=None,
        scale=engine.in_force.sentence_scale(),
    ).text
    return streamed == checked or streamed.startswith(f"{checked.rstrip()}\n\n")


def test_batched_model_answers_equal_each_question_alone(with_model: Engine) -> None:
    engine = with_model
    serving = engine.serving()
    in_use = engine.model_in_use()
    assert in_use is not None and serving.answerer is in_use.answerer
    pipeline = serving.pipeline
    questions = list(QUESTIONS)[:3]
    with pipeline.generation.paused():
        threads, results, errors = _start(engine, [{"question": q} for q in questions])
        _until(lambda: pipeline.generation.status().queue_length == len(questions))
    _join(threads, results, errors)

    from engine.rag.answer.passages import Passage

    for question, events in zip(questions, results, strict=True):
        citations, done = events[0].citations, events[-1].done
        assert done.mode == "generative" and done.model == "tiny-llama"
        streamed = "".join(e.text for e in events if isinstance(e, TokenEvent))
        assert done.answer == streamed  # what streams is checked as it is written
        passages = [
            Passage(index=c.index, text=c.text, path=c.path, page=c.page) for c in citations
        ]
        alone = "".join(in_use.answerer.stream(question=question, passages=passages))
        texts = [c.text for c in citations]
        assert _the_model_s_words(engine, streamed=streamed, alone=alone, passages=texts), question
    info = engine.status().pipeline
    assert info is not None
    assert [b.size for b in info.batches if b.worker == "generation"][-1] == len(questions)
    assert info.generation.batch_size == len(questions)
    assert info.placement.startswith("batch 1 ")
    for r in info.requests[-len(questions) :]:
        assert r.tokens > 0 and r.ttft_s is not None and 0 < r.ttft_s <= r.latency_s
        assert r.generation_s > 0 and r.priority == "interactive"
    assert info.tokens_per_s > 0


def test_an_interactive_question_overtakes_background_ones(with_model: Engine) -> None:
    engine = with_model
    pipeline = engine.serving().pipeline
    placement = engine.placement()
    assert placement is not None
    # One question per generation batch, so that the order is the scheduler's.
    pipeline.set_placement(dataclasses.replace(placement, max_batch=1))
    finished: list[str] = []
    lock = threading.Lock()

    def ask(question: str, priority: str) -> None:
        events = list(engine.ask_stream(question=question, priority=priority))  # type: ignore[arg-type]
        assert events[-1].done.mode == "generative"
        with lock:
            finished.append(priority)

    background = [threading.Thread(target=ask, args=(q, "background")) for q in list(QUESTIONS)[:3]]
    chat = threading.Thread(target=ask, args=(list(QUESTIONS)[3], "interactive"))
    try:
        with pipeline.generation.paused():
            for t in background:
                t.start()
            _until(lambda: pipeline.generation.status().queue_length == 3)
            chat.start()  # asked last, behind three background questions
            _until(lambda: pipeline.generation.status().queue_length == 4)
        for t in [*background, chat]:
            t.join(timeout=120)
    finally:
        pipeline.set_placement(placement)
    assert finished == ["interactive", "background", "background", "background"]


def test_a_placement_change_mid_run_loses_no_request(with_model: Engine) -> None:
    from engine.rag.pipeline.governor import GovernorPolicy, PlacementGovernor

    engine = with_model
    serving = engine.serving()
    pipeline, owner = serving.pipeline, serving.owner
    assert owner is not None
    # The engine's re-planning, without waiting for a backlog to persist: the planner's
    # placement for the batch that holds the backlog, applied while a batch runs.
    governor = PlacementGovernor(
        pipeline=pipeline,
        plan_for=lambda batch: owner.plan_for(batch=batch),
        in_force=lambda: owner.placement,
        policy=GovernorPolicy(
            base_batch=1, max_batch=4, grow_after_s=0, shrink_after_s=0, cooldown_s=0
        ),
        planned=1,
        start=False,
    )
    before = pipeline.status()
    questions = list(QUESTIONS)
    asks: list[dict[str, Any]] = [{"question": q} for q in questions]
    threads, results, errors = _start(engine, asks)
    _until(lambda: pipeline.generation.status().running > 0 and pipeline.generation.backlog > 1)
    target = governor.tick()  # returns once both workers run under the new placement
    _join(threads, results, errors)

    assert target in (2, 4)
    for (question, (file, _)), events in zip(QUESTIONS.items(), results, strict=True):
        assert events[0].citations[0].path.endswith(file), question
        assert events[-1].done.mode == "generative" and events[-1].done.answer, question
    after = pipeline.status()
    assert after.submitted - before.submitted == len(questions)
    assert after.finished == after.submitted
    assert after.placements_applied == before.placements_applied + 1
    in_force = engine.placement()
    assert in_force is not None and governor.placement is in_force
    assert after.placement_batch == target and in_force.batch == target
    info = engine.status().pipeline
    assert info is not None and info.placement.startswith(f"batch {target} ")
    statuses = [r.status for r in info.requests[-len(questions) :]]
    assert statuses == ["done"] * len(questions)
    # On the timeline the change is a step between two batches: the batch in flight
    # ran under the old placement, any later one under the new.
    steps = [b.placement for b in info.batches if b.worker == "generation"]
    assert steps[0] == 0 and steps == sorted(steps) and set(steps) <= {0, 1}


def test_cancel_stops_the_answer_and_frees_its_place(with_model: Engine) -> None:
    engine = with_model
    cancel = threading.Event()
    events = engine.ask_stream(question=next(iter(QUESTIONS)), cancel=cancel)
    assert isinstance(next(events), CitationsEvent)
    cancel.set()
    rest = list(events)
    assert isinstance(rest[-1], DoneEvent)
    pipeline = engine.serving().pipeline
    _until(pipeline.idle)
    assert pipeline.status().requests[-1].status == "cancelled"


def test_an_answer_without_retrieval_waits_for_the_generation_batch(with_model: Engine) -> None:
    engine = with_model
    pipeline = engine.serving().pipeline
    finished = pipeline.status().finished
    with pipeline.generation.paused():
        threads, results, errors = _start(engine, [{"question": list(QUESTIONS)[1]}])
        _until(lambda: pipeline.generation.status().queue_length == 1)
    _until(engine._answer_lock.locked)  # the batch holds the model
    # The API's retrieval:false answer takes its turn: its first piece comes only
    # after the batch's question has finished.
    pieces = engine.generate_stream(question="Say hello.")
    assert next(pieces)
    assert pipeline.status().finished == finished + 1
    list(pieces)
    _join(threads, results, errors)
    assert results[0][-1].done.mode == "generative"


def test_a_question_asked_while_a_batch_decodes_joins_it(with_model: Engine) -> None:
    from engine.rag.answer.passages import Passage

    engine = with_model
    pipeline = engine.serving().pipeline
    first, second = list(QUESTIONS)[:2]
    generation, retrieval = pipeline.generation.paused(), pipeline.retrieval.paused()
    generation.__enter__()
    threads, results, errors = _start(engine, [{"question": first}])
    _until(lambda: pipeline.generation.status().queue_length == 1)
    retrieval.__enter__()
    more, late, late_errors = _start(engine, [{"question": second}])
    _until(lambda: pipeline.retrieval.status().queue_length == 1)
    # However slow the machine, the first question must still be decoding when the second
    # arrives: its second forward (a decode step) waits until the second is queued, or
    # has joined already (it can reach the queue during the first forward, the prefill,
    # and join at the step between the two).
    in_use = engine.model_in_use()
    assert in_use is not None
    executor = in_use.answerer.executor
    forward, calls = executor.forward, []

    def gated_forward(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            _until(lambda: _queued_or_joined(pipeline.generation.status()))
        return forward(*args, **kwargs)

    executor.forward = gated_forward
    try:
        generation.__exit__(None, None, None)  # the first question decodes alone...
        _until(lambda: pipeline.generation.status().running == 1)
        retrieval.__exit__(None, None, None)  # ...when the second is retrieved
        _join(threads, results, errors)
        _join(more, late, late_errors)
    finally:
        del executor.forward

    # The worker records a batch after its last event, which the askers may hear first.
    _until(lambda: pipeline.status().generation.batches == 1)
    (record,) = pipeline.status().generation.recent
    assert record.size == 2  # one batch, grown by the question that joined it
    for question, events in ((first, results[0]), (second, late[0])):
        citations, done = events[0].citations, events[-1].done
        passages = [
            Passage(index=c.index, text=c.text, path=c.path, page=c.page) for c in citations
        ]
        alone = "".join(in_use.answerer.stream(question=question, passages=passages))
        streamed = "".join(e.text for e in events if isinstance(e, TokenEvent))
        assert done.mode == "generative" and done.answer == streamed, question
        texts = [c.text for c in citations]
        assert _the_model_s_words(engine, streamed=streamed, alone=alone, passages=texts), question


def test_a_model_change_moves_the_waiting_questions_to_the_new_model(
    with_model: Engine, tiny_model: Path
) -> None:
    """Questions waiting when the model changes are answered by the new one, none lost."""
    engine = with_model
    old = engine.serving()
    questions = list(QUESTIONS)[:3]
    with old.pipeline.generation.paused():
        threads, results, errors = _start(engine, [{"question": q} for q in questions])
        _until(lambda: old.pipeline.generation.status().queue_length == len(questions))
        engine.models.set_model(model=None)  # extractive answers from now on
    _join(threads, results, errors)
    new = engine.serving()
    assert new is not old and new.answerer is None
    for (question, (file, phrase)), events in zip(QUESTIONS.items(), results, strict=False):
        done = events[-1].done
        assert done.mode == "extractive", question
        assert events[0].citations[0].path.endswith(file) and phrase in done.answer, question
    assert old.pipeline.status().generation.batches == 0
    _until(lambda: new.pipeline.status().finished >= len(questions))
    engine.models.set_model(model=str(tiny_model))  # as the fixture left it


def test_the_old_model_starts_no_batch_while_its_hand_over_waits_for_a_thread(
    with_model: Engine, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flake of the test above, made certain: the hand-over runs on a thread of
    its own, which a loaded machine starts late; the old pipelines, let go by the
    pause, took a batch first and answered with the old model."""
    from engine.service import core

    retire = core.retire

    def starved(serving: Any, *, successor: Any) -> None:
        threading.Timer(1.0, lambda: retire(serving, successor=successor)).start()

    monkeypatch.setattr(core, "retire", starved)
    engine = with_model
    old = engine.serving()
    questions = list(QUESTIONS)[:2]
    with old.pipeline.generation.paused():
        threads, results, errors = _start(engine, [{"question": q} for q in questions])
        _until(lambda: old.pipeline.generation.status().queue_length == len(questions))
        engine.models.set_model(model=None)
    _join(threads, results, errors)
    assert [events[-1].done.mode for events in results] == ["extractive"] * len(questions)
    assert old.pipeline.status().generation.batches == 0
    monkeypatch.setattr(core, "retire", retire)
    engine.models.set_model(model=str(tiny_model))  # as the fixture left it


def test_after_an_out_of_memory_the_status_and_the_governor_report_the_demoted_placement(
    with_model: Engine,
) -> None:
    """The executor hands the placement it degraded to back to the owner: /v1/status,
    the governor and the hardware panel describe what runs, not the plan before."""
    import torch

    engine = with_model
    serving = engine.serving()
    assert serving.governor is not None and serving.answerer is not None
    planned = engine.placement()
    assert planned is not None and "disk" not in planned.layer_tiers
    executor = serving.answerer.executor
    forward, calls = executor.forward, []

    def fails_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("injected")
        return forward(*args, **kwargs)

    executor.forward = fails_once  # type: ignore[method-assign]
    try:
        events = list(engine.ask_stream(question=next(iter(QUESTIONS))))
    finally:
        del executor.forward
    assert events[-1].done.mode == "generative" and events[-1].done.answer

    demoted = engine.placement()
    assert demoted is not None and demoted is not planned
    assert "disk" in demoted.layer_tiers
    assert demoted.layer_tiers == executor.placement.layer_tiers
    assert serving.governor.placement is demoted
    info = engine.status().pipeline
    assert info is not None and "on disk" in info.placement
    hardware = engine.system.hardware()
    assert hardware.placement is not None and hardware.placement.weights.disk > 0
    # A re-plan for a larger batch keeps the layers the recovery moved down.
    bigger = serving.owner.plan_for(batch=2) if serving.owner is not None else None
    assert bigger is not None and "disk" in bigger.layer_tiers


def test_closing_during_the_warm_up_stops_its_load_and_leaves_no_thread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`close` tells the warm-up to stop: the embedder's load ends at its next step
    (`LoadStopped`), the warm-up thread has ended when `close` returns, and the
    stop is not reported as a failure."""
    from engine.paths import resolve_paths

    engine = Engine(paths=resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")}), watch=False)
    warming = engine._warming
    engine.close()
    assert warming is not None and not warming.is_alive()
    assert "warm-up failed" not in caplog.text
    assert engine.models.error() is None


@pytest.mark.parametrize("chunks", [0, 1, MIN_CHUNKS])
def test_the_warm_up_starts_the_own_words_table_for_any_collection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: int
) -> None:
    """Over any collection (every one reads "never mentioned" with it, refusal.py), the
    table of languages' own words is made at the engine's start, not by the first
    question; an empty one asks nothing."""
    from engine.rag.answer.word_languages import WordLanguages
    from engine.rag.store.lance_store import LanceStore

    started = threading.Event()
    monkeypatch.setattr(WordLanguages, "start", lambda self: started.set())
    monkeypatch.setattr(LanceStore, "counts", lambda self: (1, chunks))
    _warm_up(tmp_path, monkeypatch)
    assert started.is_set() == (chunks > 0)


def test_the_warm_up_brings_the_full_text_index_up_to_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collection indexed before the full-text index's config changed gets the new one
    at the engine's start (fulltext.refresh_index builds only what is stale)."""
    from engine.rag.store.lance_store import LanceStore

    refreshed = threading.Event()
    monkeypatch.setattr(LanceStore, "refresh_fulltext_index", lambda self: refreshed.set())
    _warm_up(tmp_path, monkeypatch)
    assert refreshed.is_set()


def _warm_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine's warm-up run to its end (no embedder or model to load), then closed."""
    from engine.paths import resolve_paths

    monkeypatch.setattr(Engine, "embedder", lambda self: None)
    monkeypatch.setattr(ModelChoice, "load_chosen", lambda self: None)
    engine = Engine(paths=resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")}), watch=False)
    try:
        warming = engine._warming
        assert warming is not None
        warming.join(30)
    finally:
        engine.close()


def test_a_question_in_a_language_no_document_is_in_is_translated_first(
    with_model: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The facts are English: with a model, a German question is translated into English
    by it before its search (engine/rag/answer/translation.py), and answered; an English
    question is not."""
    assert with_model.store.language_shares().keys() == {"en"}
    answerer = with_model.serving().answerer
    assert answerer is not None
    asked: list[str] = []
    translate = answerer.translate_request

    def noted(*, question: str, language: str, max_new_tokens: int = 64) -> Any:
        asked.append(language)
        return translate(question=question, language=language, max_new_tokens=max_new_tokens)

    monkeypatch.setattr(answerer, "translate_request", noted)
    german_question = (
        "Wann endet der Mietvertrag für das Büro und um wie viele Jahre verlängert er sich?"
    )
    events = list(with_model.ask_stream(question=german_question, max_new_tokens=4))
    assert asked == ["en"]
    assert isinstance(events[-1], DoneEvent)
    list(with_model.ask_stream(question="When does the office lease end?", max_new_tokens=4))
    assert asked == ["en"]
    # Asked of a folder of German documents (in a collection mostly English): the
    # documents the question may reach are German, so it is searched as asked.
    whole = with_model.store.language_shares
    german = {"de": 40}

    def shares(*, filters: Any = None) -> dict[str, int]:
        return german if filters is not None and filters.folders else whole(filters=filters)

    monkeypatch.setattr(with_model.store, "language_shares", shares)
    events = list(
        with_model.ask_stream(question=german_question, folders=("/de",), max_new_tokens=4)
    )
    assert asked == ["en"]
    assert isinstance(events[-1], DoneEvent)


def test_a_quoted_answer_says_the_chosen_model_failed_to_load(tmp_path: Path) -> None:
    """A model chosen before and gone at this start (its folder emptied): the answers
    are quoted, and each says the chosen model is not in use and why, not that none
    is installed."""
    from engine.paths import resolve_paths
    from engine.service.settings import save_settings
    from engine.wire import EngineSettings

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.txt").write_text("The greenhouse is watered every morning at six.")
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")}).ensure()
    gone = tmp_path / "models" / "tiny-llama"
    gone.mkdir(parents=True)
    save_settings(file=paths.settings_file, settings=EngineSettings(model=str(gone)))
    engine = Engine(paths=paths, warm_up=True)
    try:
        _added(engine, docs)
        _until(lambda: engine.models.error() is not None, timeout_s=60)
        events = list(engine.ask_stream(question="When is the greenhouse watered?"))
        done = events[-1]
        assert isinstance(done, DoneEvent) and done.done.mode == "extractive"
        assert done.done.note is not None
        assert "not in use" in done.done.note and "No language model" not in done.done.note
    finally:
        engine.close()


def test_questions_in_another_language_than_the_documents_bring_the_embedders_offer(
    local_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """English facts indexed with the English-only MiniLM: German questions bring the
    multilingual embedder's offer (engine/rag/ingest/embedder_offer.py), English ones
    do not."""
    from engine.service.question_languages import QuestionLanguages

    monkeypatch.setattr(local_engine, "question_languages", QuestionLanguages())
    list(local_engine.ask_stream(question="When does the office lease end?"))
    assert local_engine.status().languages == ["en"]
    assert local_engine.status().embedder_offer is None
    german = "Wann endet der Mietvertrag für das Büro und um wie viele Jahre verlängert er sich?"
    list(local_engine.ask_stream(question=german))
    offer = local_engine.status().embedder_offer
    assert offer is not None and offer.asked == ["de"]
    # A German question refused says why the English-only embedder found nothing.
    refused = list(local_engine.ask_stream(question="Wie hoch ist der Eiffelturm in Paris?"))
    assert isinstance(refused[-1], DoneEvent)
    done = refused[-1].done
    assert done.mode == "none"
    assert done.note is not None and "Your question is in German" in done.note
    english = list(local_engine.ask_stream(question="How tall is the Eiffel Tower in Paris?"))
    assert isinstance(english[-1], DoneEvent)
    assert english[-1].done.mode == "none" and not english[-1].done.note
