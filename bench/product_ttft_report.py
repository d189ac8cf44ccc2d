"""The figures of `ragdoll bench product_ttft`, and their printed form: pure, no engine,
no model (tests/bench/test_product_ttft.py checks them).

Issue #39's target: through the product, time to first token ≤ llama.cpp's prefill of
the same prompt + 1 s. Per question the difference is RAGDoll's time to first token at
its OpenAI API minus llama.cpp's prefill of the very prompt ids the engine fed its model;
the verdict is on the median difference."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

TARGET_S = 1.0  # issue #39: TTFT ≤ llama.cpp's prefill + 1 s


@dataclass(frozen=True, kw_only=True)
class EngineSplit:
    """What the engine itself says one request's first token took (its pipeline's
    RequestPoint, engine/wire.py): in queues, in retrieval with the relevance gate, and
    the rest up to the first token (the model's prefill and its first step, and anything
    the pipeline adds between the two workers)."""

    waiting_s: float
    retrieval_s: float
    ttft_s: float

    @property
    def after_retrieval_s(self) -> float:
        return max(0.0, self.ttft_s - self.waiting_s - self.retrieval_s)


@dataclass(frozen=True, kw_only=True)
class QuestionTiming:
    """One question: RAGDoll's side and llama.cpp's prefill of the same prompt."""

    question: str
    ttft_s: float | None  # None: no text came (refused, or failed)
    prompt_tokens: int  # the prompt the engine fed its model (0: none)
    # Whether the prompt rebuilt here has the length the engine reported: only then are
    # they the same ids and llama.cpp's timing comparable.
    prompt_checked: bool
    llama_prefill_s: float | None = None
    split: EngineSplit | None = None
    # Tokens this prompt starts with in common with the one before (the system prompt and
    # the sources' heading): the most the engine's prefix cache can have served, where
    # llama.cpp, in a fresh context, prefills them all.
    shared_start_tokens: int = 0
    # CPU seconds per wall second up to the first token (the engine process) and over
    # the prefill (llama.cpp's process): on a shared machine, how many of its cores each
    # side got. llama.cpp's threads spin at their barriers, so its figure counts waiting.
    engine_cores: float | None = None
    llama_cores: float | None = None
    note: str = ""

    @property
    def difference_s(self) -> float | None:
        """TTFT − llama.cpp's prefill; None when either side is missing or the prompt
        was not the engine's."""
        if self.ttft_s is None or self.llama_prefill_s is None or not self.prompt_checked:
            return None
        return self.ttft_s - self.llama_prefill_s


@dataclass(frozen=True, kw_only=True)
class Summary:
    """The medians over the timed questions that have both sides."""

    questions: int
    compared: int
    median_ttft_s: float | None
    median_llama_prefill_s: float | None
    median_difference_s: float | None
    target_s: float
    met: bool | None  # None: nothing to compare


def shared_start(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens `a` and `b` start with in common."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def summarise(*, timings: Sequence[QuestionTiming], target_s: float = TARGET_S) -> Summary:
    compared = [t for t in timings if t.difference_s is not None]
    difference = _median([t.difference_s for t in compared if t.difference_s is not None])
    return Summary(
        questions=len(timings),
        compared=len(compared),
        median_ttft_s=_median([t.ttft_s for t in compared if t.ttft_s is not None]),
        median_llama_prefill_s=_median(
            [t.llama_prefill_s for t in compared if t.llama_prefill_s is not None]
        ),
        median_difference_s=difference,
        target_s=target_s,
        met=None if difference is None else difference <= target_s,
    )


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def row_line(timing: QuestionTiming, *, label: str) -> str:
    """One question as a table row (markdown, as docs/benchmarks.md keeps them)."""
    split = timing.split
    cells = [
        label,
        str(timing.prompt_tokens) + ("" if timing.prompt_checked else " (unchecked)"),
        str(timing.shared_start_tokens),
        _s(timing.ttft_s),
        _s(timing.llama_prefill_s),
        _s(timing.difference_s),
        _s(timing.engine_cores),
        _s(timing.llama_cores),
        _s(split.waiting_s if split else None),
        _s(split.retrieval_s if split else None),
        _s(split.after_retrieval_s if split else None),
    ]
    line = "| " + " | ".join(cells) + " |"
    return f"{line} {timing.note}" if timing.note else line


TABLE_HEAD = (
    "| question | prompt tokens | start shared with the last prompt | RAGDoll TTFT s "
    "| llama.cpp prefill s | difference s | engine cores used | llama.cpp cores used "
    "| engine: waiting s | retrieval + gate s "
    "| to first token after retrieval s |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
)


def report_lines(
    *, warm_up: QuestionTiming | None, timings: Sequence[QuestionTiming], summary: Summary
) -> list[str]:
    lines = list(TABLE_HEAD)
    if warm_up is not None:
        lines.append(row_line(warm_up, label="warm-up (apart)"))
    lines += [row_line(t, label=f"{i + 1}. {t.question}") for i, t in enumerate(timings)]
    lines.append("")
    lines.append(
        f"median over {summary.compared} of {summary.questions} questions: TTFT "
        f"{_s(summary.median_ttft_s)} s, llama.cpp prefill {_s(summary.median_llama_prefill_s)} s, "
        f"difference {_s(summary.median_difference_s)} s (target ≤ {summary.target_s:.2f} s): "
        + {True: "met", False: "MISSED", None: "nothing to compare"}[summary.met]
    )
    if summary.met is False and summary.median_difference_s is not None:
        lines.append(f"missed by {summary.median_difference_s - summary.target_s:.2f} s")
    return lines


def as_json(
    *, warm_up: QuestionTiming | None, timings: Sequence[QuestionTiming], summary: Summary
) -> dict[str, Any]:
    def one(t: QuestionTiming) -> dict[str, Any]:
        out = asdict(t)
        out["difference_s"] = t.difference_s
        if t.split is not None:
            out["split"]["after_retrieval_s"] = t.split.after_retrieval_s
        return out

    return {
        "warm_up": one(warm_up) if warm_up is not None else None,
        "questions": [one(t) for t in timings],
        "summary": asdict(summary),
    }
