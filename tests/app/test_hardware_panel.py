"""The Hardware panel: opened from the menu, fed by the bridge, drawn with QPainter."""

from __future__ import annotations

import dataclasses

import pytest
from pytestqt.qtbot import QtBot

from app.hardware.charts import plot_geometry, tier_segments
from app.hardware.hardware_panel import HardwarePanel
from app.main_window import MainWindow
from engine.errors import EngineRequestError
from engine.wire import ProfilingStatus
from engine.wire_hardware import IndexUsage
from tests.app.conftest import MakeWindow
from tests.app.fake_client import HARDWARE, FakeClient


def open_panel(
    make_window: MakeWindow, qtbot: QtBot, client: FakeClient
) -> tuple[MainWindow, HardwarePanel]:
    """The window comes back too: dropping it would delete the panel with it."""
    window = make_window(client)
    window.hardware_action.trigger()
    panel = window.hardware_panel
    qtbot.waitUntil(lambda: panel.info is not None, timeout=5000)
    return window, panel


@pytest.mark.parametrize("tier", ["gpu", "cpu", "disk"])
def test_bar_segments_sum_to_the_placement(
    make_window: MakeWindow, qtbot: QtBot, tier: str
) -> None:
    _window, panel = open_panel(make_window, qtbot, FakeClient())
    p = HARDWARE.placement
    assert p is not None
    expected = sum(getattr(sizes, tier) for sizes in (p.weights, p.kv, p.workspace, p.partitions))
    bar = panel.bars[tier]
    assert sum(s.bytes for s in bar.segments) == expected
    assert bar.capacity == getattr(p.capacities, tier)
    # Drawn widths are in proportion: the segments cover used/capacity of the bar.
    bar.resize(600, 60)
    rects = bar.segment_rects()
    drawn = sum(r.width() for _, r in rects)
    full = bar._bar_rect().width()
    assert drawn == pytest.approx(full * expected / bar.capacity, abs=0.5)
    assert bar.accessibleName().endswith("memory")
    assert "GiB" in bar.accessibleDescription()


def test_segments_per_tier_keep_the_parts_in_order() -> None:
    segments = tier_segments(placement=HARDWARE.placement, tier="gpu")
    assert [s.label for s in segments] == ["weights", "KV cache", "workspace"]
    assert [s.label for s in tier_segments(placement=HARDWARE.placement, tier="cpu")] == [
        "weights",
        "KV cache",
        "index partitions",
    ]
    assert tier_segments(placement=None, tier="cpu") == []


def test_the_plot_draws_every_sample_point(make_window: MakeWindow, qtbot: QtBot) -> None:
    _window, panel = open_panel(make_window, qtbot, FakeClient())
    plot = panel.plot
    plot.resize(500, 300)
    plot.repaint()
    g = plot.geometry_drawn
    assert g is not None
    assert len(g.points) == len(HARDWARE.fit.samples)  # type: ignore[union-attr]
    for pt in [*g.points, *g.curve]:
        assert g.area.adjusted(-1, -1, 1, 1).contains(pt)
    # Larger batches take longer: the points climb (smaller y is higher up).
    ys = [pt.y() for pt in g.points]
    assert ys == sorted(ys, reverse=True)
    assert "T(B)" in plot.accessibleDescription()


def test_no_fit_and_no_model(make_window: MakeWindow, qtbot: QtBot) -> None:
    info = dataclasses.replace(
        HARDWARE,
        placement=None,
        fit=None,
        note="Extractive answers: no language model to place.",
        profile=dataclasses.replace(HARDWARE.profile, gpus=[]),
    )
    _window, panel = open_panel(make_window, qtbot, FakeClient(hardware_info=info))
    assert "Extractive" in panel.placement_title.text()
    assert "ragdoll profile --active" in panel.fit_label.text()
    assert not panel.bars["gpu"].isVisibleTo(panel)
    assert panel.bars["cpu"].capacity == info.profile.ram_available_bytes
    assert panel.bars["cpu"].segments == []
    assert "none" in panel.gpu_value.text()


def test_plot_geometry_without_a_generation_fit() -> None:
    fit = dataclasses.replace(HARDWARE.fit, a=None, c=None, samples=[])  # type: ignore[type-var]
    assert plot_geometry(fit=fit, width=400, height=300) is None


def test_a_failure_is_shown_and_refresh_asks_again(make_window: MakeWindow, qtbot: QtBot) -> None:
    client = FakeClient(fail={"hardware": EngineRequestError("disk unreadable", status=500)})
    window = make_window(client)
    window.hardware_action.trigger()
    panel = window.hardware_panel
    qtbot.waitUntil(lambda: "disk unreadable" in panel.state_label.text(), timeout=5000)
    assert not window.banner.isVisible()  # the panel reports it, not the main window
    client.fail.clear()
    panel.refresh_button.click()
    qtbot.waitUntil(lambda: panel.info is not None, timeout=5000)
    assert len(client.called("hardware")) == 2


def test_the_index_on_disk_and_in_memory_is_shown_true(
    make_window: MakeWindow, qtbot: QtBot
) -> None:
    """Extractive mode with a 3,900-chunk index: the bars show the index's measured
    bytes, never "0.00 GiB used"."""
    index = IndexUsage(chunks=3900, disk_bytes=41 * 2**20, resident_bytes=6 * 2**20)
    info = dataclasses.replace(
        HARDWARE, placement=None, fit=None, note="Extractive answers.", index=index
    )
    _window, panel = open_panel(make_window, qtbot, FakeClient(hardware_info=info))
    disk, ram = panel.bars["disk"], panel.bars["cpu"]
    assert [(s.label, s.bytes) for s in disk.segments] == [("index files", 41 * 2**20)]
    assert [(s.label, s.bytes) for s in ram.segments] == [("index partitions", 6 * 2**20)]
    assert "41.0 MiB used" in disk.accessibleDescription()
    assert "6.0 MiB used" in ram.accessibleDescription()
    assert "3,900 chunks" in panel.index_value.text() and "41.0 MiB" in panel.index_value.text()
    # With a placement, the index's files still count on the disk.
    placed = dataclasses.replace(HARDWARE, index=index)
    panel.show_info(placed)
    assert ("index files", 41 * 2**20) in [(s.label, s.bytes) for s in disk.segments]


def test_no_empty_chart_while_the_machine_is_timed(make_window: MakeWindow, qtbot: QtBot) -> None:
    info = dataclasses.replace(HARDWARE, placement=None, fit=None)
    _window, panel = open_panel(make_window, qtbot, FakeClient(hardware_info=info))
    panel.resize(820, 780)
    qtbot.wait(20)
    assert not panel.plot.isVisibleTo(panel)
    # The box holds its words, not an empty 400-pixel chart.
    assert panel.fit_box.height() < 200
    running = ProfilingStatus(state="running", message="generation, batch 4", fraction=0.4)
    panel.show_profiling(running)
    assert "timing this machine now" in panel.fit_label.text()
    assert panel.profiling_bar.isVisibleTo(panel) and panel.profiling_bar.value() == 40
    panel.show_profiling(ProfilingStatus(state="done"))
    assert not panel.profiling_bar.isVisibleTo(panel)


def test_without_a_plot_the_open_panel_is_as_tall_as_what_it_holds(
    make_window: MakeWindow, qtbot: QtBot
) -> None:
    """Opened from the menu it is drawn for a plot while it reads the profile; with
    no fit it then shrinks to its words (under openbox it had stayed 805 px tall,
    its lower half empty: resize() was held at the old minimum height)."""
    info = dataclasses.replace(HARDWARE, placement=None, fit=None)
    _window, panel = open_panel(make_window, qtbot, FakeClient(hardware_info=info))
    assert panel.isVisible()
    qtbot.waitUntil(lambda: panel.height() == panel.sizeHint().height(), timeout=2000)
    assert panel.height() < 700


def test_the_profiling_banner_appears_when_the_engine_starts_timing_by_itself(
    make_window: MakeWindow, qtbot: QtBot
) -> None:
    """No click starts it: the engine begins once idle, and the window's regular
    probe of the engine brings the news."""
    client = FakeClient()
    window = make_window(client)
    assert not window.profiling_banner.isVisible()
    client.profiling = ProfilingStatus(
        state="running", message="retrieval", fraction=0.5, reason="first start"
    )
    qtbot.waitUntil(lambda: window.profiling_banner.isVisible(), timeout=8000)
    assert "first start" in window.profiling_banner.label.text()
