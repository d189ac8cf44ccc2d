"""The Hardware panel: opened from the menu, fed by the bridge, drawn with QPainter."""

from __future__ import annotations

import dataclasses

import pytest
from pytestqt.qtbot import QtBot

from app.hardware.charts import plot_geometry, tier_segments
from app.hardware.hardware_panel import HardwarePanel
from app.main_window import MainWindow
from engine.errors import EngineRequestError
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
