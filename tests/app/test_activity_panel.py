"""The Activity window: PipelineInfo values go through the same path as the status
poll, and the charts hold what they say (queues, batches with the placement steps,
tokens/s, latency); no pipeline yet is a calm empty state; the poll runs only
while the window is open."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCharts import QDateTimeAxis, QValueAxis
from pytestqt.qtbot import QtBot

from app.hardware import activity_data as data
from app.hardware.activity_panel import CAP, ActivityPanel
from engine.wire import (
    BatchPoint,
    EngineStatus,
    ModelServerInfo,
    PipelineInfo,
    PipelineWorkerInfo,
    RequestPoint,
)
from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient
from tests.support.stalls import Stopwatch

T0 = 1_700_000_000.0


def _worker(*, queue: int, batch: int | None, cap: int) -> PipelineWorkerInfo:
    return PipelineWorkerInfo(
        queue_length=queue,
        running=1 if batch else 0,
        cap=cap,
        batch_size=batch,
        batches=3,
        fit_a=0.2,
        fit_c=0.6,
        fit_online=False,
    )


def _batch(*, worker: str, at: float, size: int, cap: int, placement: int) -> BatchPoint:
    return BatchPoint(
        worker=worker,  # type: ignore[arg-type]
        started=T0 + at,
        seconds=0.5,
        size=size,
        backlog=size + 1,
        cap=cap,
        placement=placement,
    )


def _request(*, at: float, latency: float, priority: str, status: str = "done") -> RequestPoint:
    return RequestPoint(
        finished=T0 + at,
        priority=priority,  # type: ignore[arg-type]
        status=status,  # type: ignore[arg-type]
        waiting_s=0.1,
        retrieval_s=0.2,
        generation_s=latency - 0.3,
        latency_s=latency,
        ttft_s=0.4,
        tokens=12,
    )


def pipeline(
    *, retrieval_queue: int = 2, generation_queue: int = 5, tps: float = 12.5
) -> PipelineInfo:
    return PipelineInfo(
        retrieval=_worker(queue=retrieval_queue, batch=2, cap=8),
        generation=_worker(queue=generation_queue, batch=4, cap=4),
        placement="model on the GPU, index in RAM",
        placement_batch=4,
        placements_applied=2,
        submitted=9,
        finished=6,
        tokens_per_s=tps,
        batches=[
            _batch(worker="retrieval", at=1, size=1, cap=8, placement=1),
            _batch(worker="generation", at=2, size=1, cap=2, placement=1),
            _batch(worker="generation", at=5, size=2, cap=2, placement=1),
            _batch(worker="generation", at=9, size=4, cap=4, placement=2),
            _batch(worker="retrieval", at=10, size=3, cap=8, placement=2),
        ],
        requests=[
            _request(at=3, latency=2.0, priority="interactive"),
            _request(at=6, latency=4.5, priority="background"),
            _request(at=8, latency=0.7, priority="interactive", status="cancelled"),
            _request(at=11, latency=3.0, priority="interactive"),
        ],
    )


class _Clock:
    def __init__(self) -> None:
        self.now = T0 + 12

    def __call__(self) -> float:
        return self.now


def test_pipeline_values_fill_every_chart(qtbot: QtBot) -> None:
    clock = _Clock()
    panel = ActivityPanel(clock=clock)
    qtbot.addWidget(panel)
    panel.show()
    for queue in (1, 3, 0):  # three polls, a second apart
        panel.show_status(
            EngineStatus(
                version="t",
                pid=1,
                documents=1,
                chunks=1,
                embedder="e",
                model="m",
                answer_mode="generative",
                pipeline=pipeline(generation_queue=queue, tps=10.0 + queue),
            )
        )
        clock.now += 1

    ms = 1000.0
    at = [(T0 + 12 + i) * ms for i in range(3)]
    assert panel.queues.points("generation") == [(at[0], 1), (at[1], 3), (at[2], 0)]
    assert panel.queues.points("retrieval") == [(x, 2) for x in at]
    assert panel.tokens.points("tokens/s") == [(at[0], 11.0), (at[1], 13.0), (at[2], 10.0)]

    # Batches come with their own history: sizes at their start times, per worker.
    assert panel.batches.points("generation") == [
        ((T0 + 2) * ms, 1),
        ((T0 + 5) * ms, 2),
        ((T0 + 9) * ms, 4),
    ]
    assert panel.batches.points("retrieval") == [((T0 + 1) * ms, 1), ((T0 + 10) * ms, 3)]
    # The cap steps up where the new placement came into force, and that step is marked.
    caps = panel.batches.points(CAP)
    assert caps[0] == ((T0 + 2) * ms, 2)
    assert ((T0 + 9) * ms, 2) in caps and ((T0 + 9) * ms, 4) in caps
    assert panel.placement_marks() == [(T0 + 9) * ms]

    assert panel.latency.points("interactive") == [((T0 + 3) * ms, 2.0), ((T0 + 11) * ms, 3.0)]
    assert panel.latency.points("background") == [((T0 + 6) * ms, 4.5)]
    assert panel.latency.points("cancelled or failed") == [((T0 + 8) * ms, 0.7)]

    # Axes: clock time along x, a y range that holds every point.
    x_axis, y_axis = panel.latency.x_axis, panel.latency.y_axis
    assert isinstance(x_axis, QDateTimeAxis) and isinstance(y_axis, QValueAxis)
    assert x_axis.min().toMSecsSinceEpoch() <= (T0 + 3) * ms
    assert x_axis.max().toMSecsSinceEpoch() >= (T0 + 11) * ms
    assert y_axis.max() >= 4.5 and y_axis.min() == 0
    assert panel.batches.y_axis.max() >= 4

    summary = panel.summary.text()
    assert "Placement in force: model on the GPU, index in RAM, batch 4" in summary
    assert "2 placements applied" in summary
    assert "Generation: 0 waiting, 1 running, batch 4 of at most 4" in summary
    assert "10.0 tokens/s" in summary
    assert all(chart.isVisible() for chart in panel.charts)


def test_no_pipeline_yet_is_a_calm_empty_state(qtbot: QtBot) -> None:
    panel = ActivityPanel(clock=_Clock())
    qtbot.addWidget(panel)
    panel.show()
    panel.show_pipeline(None)
    assert panel.summary.text().startswith("No questions answered yet")
    assert not any(chart.isVisible() for chart in panel.charts)
    assert panel.queues.points("generation") == []
    # Then the engine answers: the charts appear.
    panel.show_pipeline(pipeline())
    assert all(chart.isVisible() for chart in panel.charts)


def test_a_model_server_is_named_with_its_measured_latency(qtbot: QtBot) -> None:
    panel = ActivityPanel(clock=_Clock())
    qtbot.addWidget(panel)
    server = ModelServerInfo(
        url="http://gpu-box:8000", model="qwen2.5-7b", concurrency=8, first_token_ms=412.0
    )
    status = EngineStatus(
        version="0",
        pid=1,
        documents=0,
        chunks=0,
        embedder="e",
        model="qwen2.5-7b",
        answer_mode="generative",
        server=server,
    )
    panel.show_status(status)
    first = panel.summary.text().splitlines()[0]
    assert first == (
        "Model server: qwen2.5-7b on http://gpu-box:8000, first token 412 ms "
        "(median, measured here), up to 8 requests at once."
    )


def test_placement_changes_are_the_first_batch_under_each_new_placement() -> None:
    batches = [
        _batch(worker="generation", at=1, size=1, cap=1, placement=0),
        _batch(worker="retrieval", at=2, size=1, cap=8, placement=1),
        _batch(worker="generation", at=3, size=2, cap=2, placement=1),
        _batch(worker="generation", at=4, size=2, cap=2, placement=3),
    ]
    assert data.placement_changes(batches=batches) == [(T0 + 2) * 1000.0, (T0 + 4) * 1000.0]
    history = data.SampleHistory(limit=2)
    for q in range(3):
        history.add(pipeline=pipeline(retrieval_queue=q), at_s=T0 + q)
    assert [y for _, y in history.queue_points(worker="retrieval")] == [1, 2]  # oldest dropped


def test_activity_polls_the_status_only_while_open(qtbot: QtBot, make_window: MakeWindow) -> None:
    client = FakeClient()
    window = make_window(client)
    statuses: list[EngineStatus] = []
    window.bridge.sig_status.connect(statuses.append)
    qtbot.wait(1500)
    assert len(statuses) <= 1  # the window alone reads the status only when it needs to
    idle = len(statuses)
    panel = window.show_activity()
    qtbot.waitUntil(lambda: len(statuses) >= idle + 3, timeout=6000)
    # The fake engine has answered nothing: the calm state, not empty axes.
    assert panel.summary.text().startswith("No questions answered yet")

    client.pipeline = replace(pipeline(), tokens_per_s=42.0)
    qtbot.waitUntil(lambda: "42.0 tokens/s" in panel.summary.text(), timeout=3000)
    assert panel.tokens.points("tokens/s")[-1][1] == 42.0

    panel.close()
    qtbot.wait(300)
    closed = len(statuses)
    qtbot.wait(2500)
    assert len(statuses) <= closed + 1


def full_pipeline() -> PipelineInfo:
    """As much history as the engine keeps: 128 batches, 256 requests."""
    return replace(
        pipeline(),
        batches=[
            _batch(
                worker="generation" if i % 2 else "retrieval",
                at=i,
                size=1 + i % 8,
                cap=8,
                placement=i // 40,
            )
            for i in range(128)
        ],
        requests=[
            _request(at=i / 2, latency=1 + i % 7, priority="interactive") for i in range(256)
        ],
    )


def test_a_full_history_redraws_quickly(qtbot: QtBot) -> None:
    """The engine keeps 128 batches and 256 requests; a redraw happens every second
    on the GUI thread, so it must stay far below the 100 ms stall limit."""
    full = full_pipeline()
    clock = _Clock()
    panel = ActivityPanel(clock=clock)
    qtbot.addWidget(panel)
    panel.show()
    panel.show_pipeline(full)
    qtbot.wait(50)
    redraws = []
    for _ in range(5):
        clock.now += 1
        with Stopwatch() as redraw:
            panel.show_pipeline(full)
            panel.repaint()
        redraws.append(redraw.took)
    slowest = max(redraws, key=lambda took: took.own_s)
    assert len(panel.latency.points("interactive")) == 256
    assert slowest.own_s < 0.1, f"a redraw took {slowest}"


def test_axes_have_round_ticks_and_a_far_cap_does_not_squash_the_batches() -> None:
    assert data.tick_step(top=22.6) == 6  # 0, 6, 12, 18, 24
    assert data.tick_step(top=9.2) == 2.5
    assert data.tick_step(top=5.75, integer=True) == 2
    assert data.tick_step(top=0.5, integer=True) == 1
    assert data.batch_axis_values(sizes=[1, 6], caps=[107]) == [1, 6]
    assert data.batch_axis_values(sizes=[1, 6], caps=[8]) == [1, 6, 8]


def test_a_cap_far_above_the_batches_is_left_to_the_summary(qtbot: QtBot) -> None:
    panel = ActivityPanel(clock=_Clock())
    qtbot.addWidget(panel)
    panel.show()
    far = replace(
        pipeline(),
        batches=[_batch(worker="generation", at=2, size=3, cap=95, placement=1)],
        generation=_worker(queue=0, batch=3, cap=95),
    )
    panel.show_pipeline(far)
    assert panel.batches.y_axis.max() < 95
    assert not panel.batches.series[CAP].isVisible()
    assert "at most 95" in panel.summary.text()
    panel.show_pipeline(pipeline())
    assert panel.batches.series[CAP].isVisible()
