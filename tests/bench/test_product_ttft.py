"""`ragdoll bench product_ttft`: the figures' logic (differences, medians, the verdict,
the report) without an engine or a model; llama.cpp's prefilling child on the real
SmolLM2-135M (slow; skipped with a message without the model or llama-cpp-python)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import product_ttft
from bench.product_ttft_report import (
    EngineSplit,
    QuestionTiming,
    as_json,
    report_lines,
    shared_start,
    summarise,
)
from bench.runner import KINDS, kind_parser


def _timing(ttft: float | None, prefill: float | None, *, checked: bool = True) -> QuestionTiming:
    return QuestionTiming(
        question="q?",
        ttft_s=ttft,
        prompt_tokens=1000,
        prompt_checked=checked,
        llama_prefill_s=prefill,
        split=EngineSplit(waiting_s=0.5, retrieval_s=1.0, ttft_s=ttft or 0.0),
    )


def test_difference_needs_both_sides_and_the_engines_own_prompt() -> None:
    assert _timing(12.5, 10.0).difference_s == pytest.approx(2.5)
    assert _timing(None, 10.0).difference_s is None
    assert _timing(12.5, None).difference_s is None
    # A rebuilt prompt of another length is not the engine's: no comparison.
    assert _timing(12.5, 10.0, checked=False).difference_s is None


def test_split_after_retrieval_is_what_is_left_of_the_first_token() -> None:
    split = EngineSplit(waiting_s=0.5, retrieval_s=1.0, ttft_s=4.0)
    assert split.after_retrieval_s == pytest.approx(2.5)
    assert EngineSplit(waiting_s=2.0, retrieval_s=3.0, ttft_s=4.0).after_retrieval_s == 0.0


def test_summary_takes_medians_of_the_compared_questions_only() -> None:
    timings = [_timing(11.0, 10.0), _timing(13.0, 10.0), _timing(20.0, 10.0), _timing(None, 9.0)]
    summary = summarise(timings=timings)
    assert (summary.questions, summary.compared) == (4, 3)
    assert summary.median_ttft_s == pytest.approx(13.0)
    assert summary.median_llama_prefill_s == pytest.approx(10.0)
    assert summary.median_difference_s == pytest.approx(3.0)
    assert summary.met is False


def test_target_met_at_one_second_and_nothing_to_compare_says_so() -> None:
    assert summarise(timings=[_timing(11.0, 10.0)]).met is True
    empty = summarise(timings=[_timing(None, None)])
    assert empty.met is None and empty.median_difference_s is None


def test_report_names_the_miss_and_keeps_the_warm_up_apart() -> None:
    timed = [_timing(13.0, 10.0), _timing(12.0, 10.0)]
    summary = summarise(timings=timed)
    lines = report_lines(warm_up=_timing(40.0, 11.0), timings=timed, summary=summary)
    assert lines[2].startswith("| warm-up (apart) | 1000 | 0 | 40.00 | 11.00 | 29.00 | - | - |")
    assert "MISSED" in lines[-2] and "over 2 of 2" in lines[-2]
    assert lines[-1] == "missed by 1.50 s"
    figures = as_json(warm_up=None, timings=timed, summary=summary)
    assert figures["questions"][0]["difference_s"] == pytest.approx(3.0)
    assert figures["questions"][0]["split"]["after_retrieval_s"] == pytest.approx(11.5)
    assert figures["summary"]["median_difference_s"] == pytest.approx(2.5)


def test_shared_start_counts_the_common_leading_tokens() -> None:
    assert shared_start([1, 2, 3, 4], [1, 2, 9]) == 2
    assert shared_start([1, 2], [1, 2, 3]) == 2
    assert shared_start([], [1]) == 0


def test_registered_as_a_bench_kind_with_its_defaults() -> None:
    assert "product_ttft" in KINDS
    options = kind_parser(kind="product_ttft", module=product_ttft).parse_args([])
    assert options.timed == 5 and options.model == product_ttft.DEFAULT_MODEL
    assert options.threads is None and not options.skip_profiling


@pytest.mark.slow  # a llama.cpp process and a real model (seconds on a quiet machine)
def test_llama_child_loads_once_then_times_each_prompt() -> None:
    from bench.offload_llama import unavailable_reason
    from bench.product_ttft_llama import LlamaPrefiller
    from bench.real_models import fetch_hint, find_real_model

    name = "smollm2-135m-instruct-q4_1"
    gguf: Path | None = find_real_model(name)
    if gguf is None:
        pytest.skip(fetch_hint(name))
    if unavailable_reason():
        pytest.skip(str(unavailable_reason()))
    with LlamaPrefiller(gguf=gguf, threads=1, n_ctx=256) as llama:
        first, first_cpu = llama.prefill(list(range(100, 164)))
        again, again_cpu = llama.prefill(list(range(100, 164)))
        assert llama.load_s is not None and llama.load_s > 0
    assert first > 0 and again > 0
    assert first_cpu > 0 and again_cpu > 0
