"""The Activity window: the two pipelines live (issue #6, the paper's Figures 7 and 9).

A line with the Placement in force and the batches now, then four charts:
queue lengths, batch sizes over time with the placement changes marked, generated
tokens per second, and the latency of each request. Like the Hardware panel it
never asks the engine itself: the main window polls `/v1/status` (once a second,
only while this window is open) and hands each status to `show_status`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCharts import (
    QChart,
    QChartView,
    QDateTimeAxis,
    QLineSeries,
    QScatterSeries,
    QValueAxis,
    QXYSeries,
)
from PySide6.QtCore import QDateTime, QEvent, QMargins, QPointF, Qt, Signal
from PySide6.QtGui import QColor, QHideEvent, QPainter, QPen, QShowEvent
from PySide6.QtWidgets import QDialog, QGridLayout, QLabel, QVBoxLayout, QWidget

from app.hardware import activity_data as data
from app.qt_compat import emit
from app.screen_fit import resize_within_screen
from app.theme import is_dark
from engine.wire import EngineStatus, PipelineInfo

# Okabe–Ito, as the Hardware panel: retrieval blue, generation orange.
COLORS = {
    "retrieval": QColor("#0072B2"),
    "generation": QColor("#E69F00"),
    "interactive": QColor("#0072B2"),
    "background": QColor("#009E73"),
    "failed": QColor("#D55E00"),
    "placement": QColor("#CC79A7"),
    "cap": QColor("#7f8c8d"),
    "tokens": QColor("#009E73"),
}
CAP = "generation cap"  # the largest generation batch the placement allows
WINDOW_MS = 5 * 60 * 1000  # the time axes show the last five minutes at most


class TimeChart(QChartView):
    """One chart: a clock-time x axis and a value y axis, series replaced whole."""

    def __init__(
        self, *, title: str, y_title: str, integer: bool = False, parent: QWidget | None = None
    ) -> None:
        chart = QChart()
        chart.setTitle(title)
        chart.setMargins(QMargins(4, 4, 4, 4))
        chart.legend().setAlignment(Qt.AlignmentFlag.AlignBottom)
        super().__init__(chart, parent)
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setMinimumSize(380, 240)
        self.setAccessibleName(title)
        self.x_axis = QDateTimeAxis()
        self.x_axis.setFormat("hh:mm:ss")
        self.x_axis.setTickCount(5)
        self.y_axis = QValueAxis()
        self.y_axis.setTitleText(y_title)
        self.integer = integer  # counts: whole-number ticks
        self.y_axis.setLabelFormat("%d" if integer else "%.3g")
        chart.addAxis(self.x_axis, Qt.AlignmentFlag.AlignBottom)
        chart.addAxis(self.y_axis, Qt.AlignmentFlag.AlignLeft)
        self.series: dict[str, QXYSeries] = {}

    def add_series(
        self, *, name: str, series: QXYSeries, color: QColor, in_legend: bool = True
    ) -> QXYSeries:
        series.setName(name)
        series.setProperty("ragdollColor", color)
        _style(series)
        self.chart().addSeries(series)
        series.attachAxis(self.x_axis)
        series.attachAxis(self.y_axis)
        if not in_legend:
            for marker in self.chart().legend().markers(series):
                marker.setVisible(False)
        self.series[name] = series
        return series

    def points(self, name: str) -> list[tuple[float, float]]:
        """What a series holds now (for tests and the accessible description)."""
        return [(p.x(), p.y()) for p in self.series[name].points()]

    def set_points(self, name: str, points: list[tuple[float, float]]) -> None:
        self.series[name].replace([QPointF(x, y) for x, y in points])

    def show_series(self, name: str, *, visible: bool) -> None:
        series = self.series[name]
        series.setVisible(visible)
        for marker in self.chart().legend().markers(series):
            marker.setVisible(visible)

    def set_ranges(self, *, start_ms: float, end_ms: float, y_max: float) -> None:
        # A range of zero width draws nothing: give a lone point a minute around it.
        if end_ms - start_ms < 60_000:
            start_ms = end_ms - 60_000
        self.x_axis.setRange(
            QDateTime.fromMSecsSinceEpoch(int(start_ms)), QDateTime.fromMSecsSinceEpoch(int(end_ms))
        )
        step = data.tick_step(top=y_max, integer=self.integer)
        self.y_axis.setRange(0, 4 * step)
        self.y_axis.setTickCount(5)

    def apply_theme(self, *, dark: bool) -> None:
        self.chart().setTheme(
            QChart.ChartTheme.ChartThemeDark if dark else QChart.ChartTheme.ChartThemeLight
        )
        for series in self.series.values():
            _style(series)  # a theme resets colours: put the series' own back


def _style(series: QXYSeries) -> None:
    color = series.property("ragdollColor")
    if not isinstance(color, QColor):
        return
    if isinstance(series, QScatterSeries):
        series.setMarkerSize(8)
        series.setColor(color)
        series.setBorderColor(color)
        return
    pen = QPen(color, 2)
    if series.property("ragdollDashed"):
        pen.setStyle(Qt.PenStyle.DashLine)
    series.setPen(pen)


def _line(*, color: QColor, dashed: bool = False) -> QLineSeries:
    series = QLineSeries()
    series.setProperty("ragdollColor", color)
    series.setProperty("ragdollDashed", dashed)
    return series


def _scatter(*, color: QColor, shape: QScatterSeries.MarkerShape | None = None) -> QScatterSeries:
    series = QScatterSeries()
    series.setProperty("ragdollColor", color)
    if shape is not None:
        series.setMarkerShape(shape)
    return series


class ActivityPanel(QDialog):
    sig_visible = Signal(bool)  # the window polls the engine only while this is open

    def __init__(
        self, *, clock: Callable[[], float] = time.time, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("activityPanel")
        self.setWindowTitle("Activity")
        self.setModal(False)
        resize_within_screen(widget=self, width=1000, height=760)
        self._clock = clock
        self.history = data.SampleHistory()
        self.pipeline: PipelineInfo | None = None
        self._placement_series: list[QLineSeries] = []

        self.summary = QLabel()
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary.setAccessibleName("Placement in force and batches now")

        self.queues = TimeChart(
            title="Requests waiting (sampled while open)", y_title="requests", integer=True
        )
        for worker in data.WORKERS:
            self.queues.add_series(
                name=worker, series=_line(color=COLORS[worker]), color=COLORS[worker]
            )
        self.batches = TimeChart(
            title="Batch size per batch, placement changes marked",
            y_title="batch size",
            integer=True,
        )
        for worker in data.WORKERS:
            self.batches.add_series(
                name=worker,
                series=_scatter(color=COLORS[worker]),
                color=COLORS[worker],
            )
        self.batches.add_series(
            name=CAP,
            series=_line(color=COLORS["cap"], dashed=True),
            color=COLORS["cap"],
        )
        self.tokens = TimeChart(title="Generated tokens per second (last 30 s)", y_title="tokens/s")
        self.tokens.add_series(
            name="tokens/s", series=_line(color=COLORS["tokens"]), color=COLORS["tokens"]
        )
        self.latency = TimeChart(title="Latency of each question", y_title="seconds")
        for priority in ("interactive", "background"):
            self.latency.add_series(
                name=priority, series=_scatter(color=COLORS[priority]), color=COLORS[priority]
            )
        self.latency.add_series(
            name="cancelled or failed",
            series=_scatter(
                color=COLORS["failed"], shape=QScatterSeries.MarkerShape.MarkerShapeRectangle
            ),
            color=COLORS["failed"],
        )
        self.charts = (self.queues, self.batches, self.tokens, self.latency)

        grid = QGridLayout()
        grid.addWidget(self.queues, 0, 0)
        grid.addWidget(self.batches, 0, 1)
        grid.addWidget(self.tokens, 1, 0)
        grid.addWidget(self.latency, 1, 1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addLayout(grid, 1)
        self.apply_theme()
        self.show_pipeline(None)

    # -- what the main window hands over ---------------------------------------------

    def show_status(self, status: EngineStatus) -> None:
        self.show_pipeline(status.pipeline)
        server = status.server
        if server is not None:  # no placement here: the server's model and its latency
            latency = (
                f"first token {server.first_token_ms:.0f} ms (median, measured here)"
                if server.first_token_ms is not None
                else "no answer measured yet"
            )
            self.summary.setText(
                f"Model server: {server.model} on {server.url}, {latency}, up to "
                f"{server.concurrency} requests at once.\n{self.summary.text()}"
            )

    def show_pipeline(self, pipeline: PipelineInfo | None) -> None:
        """The one update path: a status from the poll, or a value from a test."""
        self.pipeline = pipeline
        self.summary.setText("\n".join(data.summary_lines(pipeline=pipeline)))
        now_ms = self._clock() * 1000.0
        if pipeline is not None:
            self.history.add(pipeline=pipeline, at_s=now_ms / 1000.0)
            self._draw(pipeline=pipeline, now_ms=now_ms)
        for chart in self.charts:
            chart.setVisible(pipeline is not None)

    def apply_theme(self) -> None:
        dark = is_dark()
        for chart in self.charts:
            chart.apply_theme(dark=dark)

    # -- drawing -------------------------------------------------------------------------

    def _draw(self, *, pipeline: PipelineInfo, now_ms: float) -> None:
        start_ms = now_ms - WINDOW_MS
        queue_y: list[float] = []
        for worker in data.WORKERS:
            points = self.history.queue_points(worker=worker)
            self.queues.set_points(worker, points)
            queue_y += [y for _, y in points]
        self.queues.set_ranges(
            start_ms=self._first(self.history.queue_points(worker="retrieval"), start_ms),
            end_ms=now_ms,
            y_max=data.axis_range(values=queue_y, floor=4),
        )

        sizes: list[float] = []
        for worker in data.WORKERS:
            points = data.batch_points(batches=pipeline.batches, worker=worker)
            self.batches.set_points(worker, points)
            sizes += [y for _, y in points]
        caps = data.cap_steps(batches=pipeline.batches, worker="generation")
        if caps:
            caps.append((now_ms, caps[-1][1]))  # the cap holds until the next placement
        self.batches.set_points(CAP, caps)
        on_scale = data.batch_axis_values(sizes=sizes, caps=[y for _, y in caps])
        y_max = data.axis_range(values=on_scale, floor=4)
        # A cap far above the batches is off the axis: the summary line gives it.
        self.batches.show_series(CAP, visible=bool(caps) and max(y for _, y in caps) <= y_max)
        first_batch = min((b.started * 1000.0 for b in pipeline.batches), default=now_ms)
        self.batches.set_ranges(start_ms=max(first_batch, start_ms), end_ms=now_ms, y_max=y_max)
        self._mark_placements(
            changes=data.placement_changes(batches=pipeline.batches),
            top=self.batches.y_axis.max(),
        )

        tokens = self.history.tokens_points()
        self.tokens.set_points("tokens/s", tokens)
        self.tokens.set_ranges(
            start_ms=self._first(tokens, start_ms),
            end_ms=now_ms,
            y_max=data.axis_range(values=[y for _, y in tokens], floor=1),
        )

        latencies: list[float] = []
        for priority in ("interactive", "background"):
            points = data.latency_points(requests=pipeline.requests, priority=priority)
            self.latency.set_points(priority, points)
            latencies += [y for _, y in points]
        failed = data.failed_points(requests=pipeline.requests)
        self.latency.set_points("cancelled or failed", failed)
        first_request = min((r.finished * 1000.0 for r in pipeline.requests), default=now_ms)
        self.latency.set_ranges(
            start_ms=max(first_request, start_ms),
            end_ms=now_ms,
            y_max=data.axis_range(values=latencies + [y for _, y in failed], floor=1),
        )

    @staticmethod
    def _first(points: list[tuple[float, float]], start_ms: float) -> float:
        return max(points[0][0], start_ms) if points else start_ms

    def _mark_placements(self, *, changes: list[float], top: float) -> None:
        """A vertical line where each new placement came into force."""
        chart = self.batches.chart()
        for series in self._placement_series:
            chart.removeSeries(series)
            self.batches.series.pop(series.name(), None)
            series.deleteLater()
        self._placement_series = []
        for i, at_ms in enumerate(changes):
            name = "new placement" if i == 0 else f"new placement ({i + 1})"
            series = _line(color=COLORS["placement"])
            self.batches.add_series(
                name=name, series=series, color=COLORS["placement"], in_legend=i == 0
            )
            series.replace([QPointF(at_ms, 0), QPointF(at_ms, top)])
            self._placement_series.append(series)

    def placement_marks(self) -> list[float]:
        """Where the placement-change lines stand (ms), for tests."""
        return [s.points()[0].x() for s in self._placement_series]

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self.apply_theme()  # the app switched between light and dark

    # -- polling only while open ------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        emit(self.sig_visible, True)

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        emit(self.sig_visible, False)
