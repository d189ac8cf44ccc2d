"""QPainter charts for the Hardware panel (no QtCharts in PySide6-Essentials).

`TierBar`: one memory tier as a horizontal stacked bar of weights, KV cache,
workspace and index partitions against its capacity, with the usable budget
marked. `FitPlot`: the fitted T(B) = a·B^c curve with the timed points.

The numbers the widgets draw are computed by pure functions (`tier_segments`,
`plot_geometry`) so tests can check them without reading pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPainterPath, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.theme import is_dark
from engine.wire_hardware import FitSummary, IndexUsage, PlacementSummary

GIB = 2**30

# Colour-blind-safe (Okabe–Ito) so that four adjacent segments stay apart.
SEGMENT_COLORS = {
    "weights": QColor("#0072B2"),
    "KV cache": QColor("#E69F00"),
    "workspace": QColor("#009E73"),
    "index partitions": QColor("#CC79A7"),
    "index files": QColor("#56B4E9"),
}
FREE_COLOR = QColor("#e9ecef")
BUDGET_COLOR = QColor("#c0392b")
TIER_LABELS = {"gpu": "GPU", "cpu": "RAM", "disk": "Disk"}


def ink(widget: QWidget) -> QColor:
    """The theme's text colour: a fixed dark grey vanished on the dark theme."""
    return widget.palette().color(QPalette.ColorRole.WindowText)


def track() -> QColor:
    """The empty part of a bar, a shade off the window's background."""
    return QColor("#3a404a") if is_dark() else FREE_COLOR


@dataclass(frozen=True, kw_only=True)
class Segment:
    label: str
    bytes: int


def tier_segments(
    *, placement: PlacementSummary | None, tier: str, index: IndexUsage | None = None
) -> list[Segment]:
    """What lives on `tier` ("gpu", "cpu", "disk"), in drawing order; empty parts
    are left out. The placement's parts are planned; the index's are measured: its
    files on disk always, and what it holds in RAM when no placement says."""
    out: list[Segment] = []
    if placement is not None:
        parts = (
            ("weights", placement.weights),
            ("KV cache", placement.kv),
            ("workspace", placement.workspace),
            ("index partitions", placement.partitions),
        )
        out = [Segment(label=label, bytes=getattr(sizes, tier)) for label, sizes in parts]
    if index is not None:
        if tier == "cpu" and placement is None:
            out.append(Segment(label="index partitions", bytes=index.resident_bytes))
        if tier == "disk":
            out.append(Segment(label="index files", bytes=index.disk_bytes))
    return [s for s in out if s.bytes > 0]


def gib(n: float) -> str:
    """Bytes in GiB, or in MiB below one GiB: an index of a few thousand chunks is
    tens of MiB, which "0.00 GiB" would hide."""
    value = n / GIB
    if 0 < n < GIB:
        return f"{n / 2**20:.1f} MiB"
    return f"{value:.2f} GiB" if value < 10 else f"{value:.1f} GiB"


class TierBar(QWidget):
    """One tier: a stacked bar, the budget as a red tick, GiB labels below."""

    def __init__(self, *, tier: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tier = tier
        self.title = TIER_LABELS[tier]
        self.segments: list[Segment] = []
        self.capacity = 0
        self.budget = 0
        self.setMinimumHeight(58)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setObjectName(f"tierBar_{tier}")

    def sizeHint(self) -> QSize:
        return QSize(480, 58)

    def set_data(
        self, *, title: str, segments: list[Segment], capacity: int, budget: int = 0
    ) -> None:
        self.title = title
        self.segments = segments
        self.capacity = max(capacity, 0)
        self.budget = budget
        used = sum(s.bytes for s in segments)
        parts = ", ".join(f"{s.label} {gib(s.bytes)}" for s in segments) or "nothing placed"
        self.setAccessibleName(f"{title} memory")
        self.setAccessibleDescription(f"{parts}; {gib(used)} used of {gib(self.capacity)}")
        self.setToolTip(self.accessibleDescription())
        self.update()

    def segment_rects(self) -> list[tuple[Segment, QRectF]]:
        """Where each segment is drawn; widths are proportional to bytes/capacity."""
        bar = self._bar_rect()
        scale = bar.width() / self.capacity if self.capacity else 0.0
        x = bar.left()
        out = []
        for s in self.segments:
            w = min(s.bytes * scale, bar.right() - x)
            out.append((s, QRectF(x, bar.top(), max(w, 0.0), bar.height())))
            x += w
        return out

    def _bar_rect(self) -> QRectF:
        return QRectF(70, 4, max(self.width() - 80, 10), 22)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        bar = self._bar_rect()
        bold = QFont(self.font())
        bold.setBold(True)
        p.setFont(bold)
        p.setPen(ink(self))
        p.drawText(
            QRectF(0, bar.top(), 66, bar.height()), Qt.AlignmentFlag.AlignVCenter, self.title
        )
        p.setFont(self.font())
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(track())
        p.drawRoundedRect(bar, 3, 3)
        for segment, rect in self.segment_rects():
            p.setBrush(SEGMENT_COLORS[segment.label])
            p.drawRect(rect)
        if self.capacity and 0 < self.budget < self.capacity:
            x = bar.left() + bar.width() * self.budget / self.capacity
            p.setPen(QPen(BUDGET_COLOR, 2, Qt.PenStyle.DashLine))
            p.drawLine(QPointF(x, bar.top() - 3), QPointF(x, bar.bottom() + 3))
        used = sum(s.bytes for s in self.segments)
        p.setPen(ink(self))
        text_rect = QRectF(bar.left(), bar.bottom() + 4, bar.width(), 20)
        p.drawText(text_rect, Qt.AlignmentFlag.AlignLeft, f"{gib(used)} used")
        right = f"capacity {gib(self.capacity)}"
        if self.budget:
            right = f"usable {gib(self.budget)} · " + right
        p.drawText(text_rect, Qt.AlignmentFlag.AlignRight, right)
        p.end()


class Legend(QWidget):
    """Colour keys for the bar segments and the budget tick."""

    def __init__(self, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumHeight(22)
        self.setAccessibleName("Legend")
        keys = [*SEGMENT_COLORS, "usable budget (capacity less a margin)"]
        self.setAccessibleDescription(", ".join(keys))
        self.setToolTip("The red tick: usable budget, the capacity less a safety margin")

    def sizeHint(self) -> QSize:
        return QSize(680, 22)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        x = 70.0
        metrics = p.fontMetrics()
        for label, color in SEGMENT_COLORS.items():
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(color)
            p.drawRect(QRectF(x, 6, 12, 12))
            p.setPen(ink(self))
            p.drawText(QPointF(x + 17, 16), label)
            x += 17 + metrics.horizontalAdvance(label) + 18
        p.setPen(QPen(BUDGET_COLOR, 2, Qt.PenStyle.DashLine))
        p.drawLine(QPointF(x + 6, 3), QPointF(x + 6, 21))
        p.setPen(ink(self))
        p.drawText(QPointF(x + 14, 16), "usable")
        p.end()


@dataclass(frozen=True, kw_only=True)
class PlotGeometry:
    """The plot's mapping from (B, seconds) to pixels, and what it draws."""

    area: QRectF
    x_max: float
    y_max: float
    points: list[QPointF]  # the timed samples, in pixels
    curve: list[QPointF]  # the fitted T(B), in pixels

    def to_pixel(self, b: float, t: float) -> QPointF:
        return QPointF(
            self.area.left() + self.area.width() * b / self.x_max,
            self.area.bottom() - self.area.height() * t / self.y_max,
        )


def plot_geometry(*, fit: FitSummary, width: int, height: int) -> PlotGeometry | None:
    """None when there is no generation fit to draw (extractive mode)."""
    if fit.a is None or fit.c is None or not fit.samples:
        return None
    a, c = fit.a, fit.c
    area = QRectF(58, 28, max(width - 78, 10), max(height - 72, 10))
    # Batch sizes are whole numbers: an axis end divisible by the 4 tick intervals.
    x_max = float(4 * math.ceil(max(b for b, _ in fit.samples) * 1.1 / 4))
    y_top = max(max(t for _, t in fit.samples), a * x_max**c)
    y_max = 4 * _nice_ceiling(y_top * 1.1 / 4)
    empty = PlotGeometry(area=area, x_max=x_max, y_max=y_max, points=[], curve=[])
    points = [empty.to_pixel(b, t) for b, t in fit.samples]
    steps = 80
    curve = [
        empty.to_pixel(b, a * b**c)
        # From B = 1: a batch smaller than one question means nothing.
        for b in (1 + (x_max - 1) * i / steps for i in range(steps + 1))
        if a * b**c <= y_max
    ]
    return PlotGeometry(area=area, x_max=x_max, y_max=y_max, points=points, curve=curve)


def _nice_ceiling(value: float) -> float:
    """A round tick step at least `value` (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 × 10^k),
    so that four steps make round axis labels."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if value <= step * power:
            return step * power
    return 10 * power


class FitPlot(QWidget):
    """The fitted generation time T(B) = a·B^c with its timed points."""

    def __init__(self, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.fit: FitSummary | None = None
        self.geometry_drawn: PlotGeometry | None = None  # what the last paint drew
        self.setMinimumSize(360, 220)
        self.setAccessibleName("Generation time per batch")

    def set_fit(self, fit: FitSummary | None) -> None:
        self.fit = fit
        if fit is not None and fit.a is not None and fit.c is not None:
            points = ", ".join(f"B={b:g}: {t:.3f} s" for b, t in fit.samples)
            self.setAccessibleDescription(
                f"T(B) = {fit.a:.3f}·B^{fit.c:.2f} seconds; measured {points}"
            )
        else:
            self.setAccessibleDescription("no generation fit")
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        g = (
            plot_geometry(fit=self.fit, width=self.width(), height=self.height())
            if self.fit
            else None
        )
        self.geometry_drawn = g
        if g is None:
            p.setPen(ink(self))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "No generation fit yet")
            p.end()
            return
        self._axes(p, g)
        path = QPainterPath(g.curve[0])
        for pt in g.curve[1:]:
            path.lineTo(pt)
        p.setPen(QPen(SEGMENT_COLORS["weights"], 2))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawPath(path)
        p.setPen(QPen(QColor("white"), 1.5))
        p.setBrush(SEGMENT_COLORS["KV cache"])
        for pt in g.points:
            p.drawEllipse(pt, 5, 5)
        assert self.fit is not None and self.fit.a is not None and self.fit.c is not None
        p.setPen(ink(self))
        title = f"T(B) = {self.fit.a:.3f} · B^{self.fit.c:.2f} s   (R² {self.fit.r2 or 0:.3f})"
        p.drawText(QRectF(g.area.left(), 4, g.area.width(), 20), Qt.AlignmentFlag.AlignLeft, title)
        p.end()

    def _axes(self, p: QPainter, g: PlotGeometry) -> None:
        a = g.area
        p.setPen(QPen(QColor("#3a404a") if is_dark() else QColor("#dee2e6"), 1))
        for i in range(1, 5):
            y = a.bottom() - a.height() * i / 4
            p.drawLine(QPointF(a.left(), y), QPointF(a.right(), y))
        p.setPen(QPen(ink(self), 1))
        p.drawLine(a.bottomLeft(), a.bottomRight())
        p.drawLine(a.bottomLeft(), a.topLeft())
        for i in range(5):
            x = a.left() + a.width() * i / 4
            p.drawText(
                QRectF(x - 30, a.bottom() + 4, 60, 16),
                Qt.AlignmentFlag.AlignHCenter,
                f"{g.x_max * i / 4:g}",
            )
            y = a.bottom() - a.height() * i / 4
            p.drawText(
                QRectF(0, y - 8, a.left() - 6, 16),
                Qt.AlignmentFlag.AlignRight,
                f"{g.y_max * i / 4:.3g}",
            )
        p.drawText(
            QRectF(a.left(), a.bottom() + 22, a.width(), 18),
            Qt.AlignmentFlag.AlignHCenter,
            "batch size B",
        )
        p.save()
        p.translate(12, a.center().y())
        p.rotate(-90)
        p.drawText(QRectF(-60, -10, 120, 20), Qt.AlignmentFlag.AlignCenter, "seconds")
        p.restore()
