"""The Hardware panel: the machine's profile, the placement as stacked bars per tier,
and the active-profile fit T(B) as a plot.

A window of its own (like the source viewer) opened from the Hardware menu. It never
asks the engine itself: the main window asks the bridge and hands the answer to
`show_info` (or a failure to `show_error`).
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.hardware.charts import FitPlot, Legend, TierBar, gib, tier_segments
from app.qt_compat import emit
from app.screen_fit import resize_within_screen
from engine.wire import ProfilingStatus
from engine.wire_hardware import HardwareInfo, HardwareSummary, IndexUsage, PlacementSummary

NOISY_R2 = 0.8


def _label(*, name: str) -> QLabel:
    label = QLabel()
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setWordWrap(True)
    label.setAccessibleName(name)
    return label


def _rate(value: float | None) -> str:
    return f"{value / 1e9:.2f} GB/s" if value else "not measured yet"


class HardwarePanel(QDialog):
    sig_refresh = Signal()

    def __init__(self, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hardwarePanel")
        self.setWindowTitle("Hardware")
        self.setModal(False)
        resize_within_screen(widget=self, width=820, height=780)
        self.info: HardwareInfo | None = None

        self.state_label = _label(name="Hardware panel state")
        self.state_label.setObjectName("quiet")
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setAccessibleName("Read the hardware profile again")
        self.refresh_button.clicked.connect(lambda: emit(self.sig_refresh))

        self.gpu_value = _label(name="GPUs")
        self.ram_value = _label(name="RAM")
        self.disk_value = _label(name="Disk")
        self.cores_value = _label(name="CPU cores")
        self.index_value = _label(name="Index")
        machine = QGroupBox("This machine")
        form = QFormLayout(machine)
        form.addRow("GPU", self.gpu_value)
        form.addRow("RAM", self.ram_value)
        form.addRow("Disk", self.disk_value)
        form.addRow("CPU", self.cores_value)
        form.addRow("Index", self.index_value)

        self.placement_title = _label(name="Placement")
        self.bars = {tier: TierBar(tier=tier) for tier in ("gpu", "cpu", "disk")}
        placement = QGroupBox("Where the model and the index live")
        pl = QVBoxLayout(placement)
        pl.addWidget(self.placement_title)
        for bar in self.bars.values():
            pl.addWidget(bar)
        pl.addWidget(Legend())

        self.fit_label = _label(name="Active profile")
        self.profiling_bar = QProgressBar()
        self.profiling_bar.setRange(0, 100)
        self.profiling_bar.setAccessibleName("Timing this machine")
        self.profiling_bar.hide()
        self.plot = FitPlot()
        self.fit_box = QGroupBox("Generation time per batch (active profile)")
        fl = QVBoxLayout(self.fit_box)
        fl.addWidget(self.fit_label)
        fl.addWidget(self.profiling_bar)
        fl.addWidget(self.plot, 1)
        self._profiling: ProfilingStatus | None = None

        top = QHBoxLayout()
        top.addWidget(self.state_label, 1)
        top.addWidget(self.refresh_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(machine)
        layout.addWidget(placement)
        layout.addWidget(self.fit_box, 1)
        # Takes the spare height while there is no plot, so no empty box grows.
        self._spare = QWidget()
        layout.addWidget(self._spare, 0)
        self._layout = layout
        self.show_loading()

    # -- what the main window hands over --------------------------------------------

    def show_loading(self) -> None:
        self.refresh_button.setEnabled(False)
        self.state_label.setText(
            "Reading the hardware profile… (the first time, the disk is measured)"
        )

    def show_error(self, message: str) -> None:
        self.refresh_button.setEnabled(True)
        self.state_label.setText(f"Could not read the hardware profile: {message}")

    def show_info(self, info: HardwareInfo) -> None:
        self.info = info
        self.refresh_button.setEnabled(True)
        self.state_label.setText("")
        self._show_profile(info.profile)
        self._show_placement(info.placement, profile=info.profile, note=info.note, index=info.index)
        self._show_index(info)
        self._show_fit()

    def show_profiling(self, status: ProfilingStatus | None) -> None:
        """The engine's timing of this machine, as the status brings it."""
        running = status is not None and status.state == "running"
        was_running = self._profiling is not None and self._profiling.state == "running"
        if not running and not was_running:
            return
        self._profiling = status
        if self.info is not None:
            self._show_fit()
        if was_running and not running and self.isVisible():
            emit(self.sig_refresh)  # a new fit to show

    def _show_fit(self) -> None:
        assert self.info is not None
        fit = self.info.fit
        status = self._profiling
        profiling = status is not None and status.state == "running"
        has_plot = fit is not None and fit.a is not None
        self.plot.set_fit(fit)
        self.plot.setVisible(has_plot)
        self.profiling_bar.setVisible(profiling)
        # The group box grows only with a plot to show; else a short box, no void.
        self._layout.setStretchFactor(self.fit_box, 1 if has_plot else 0)
        self._layout.setStretchFactor(self._spare, 0 if has_plot else 1)
        if not has_plot:
            # Once the layout has taken the plot's absence in: no empty lower half.
            QTimer.singleShot(0, self, self._fit_height)
        if profiling and status is not None:
            self.profiling_bar.setValue(round(100 * status.fraction))
            self.fit_label.setText(
                f"The engine is timing this machine now: {status.message or 'starting'}. "
                "The measured curve appears here when it is done."
            )
        elif fit is None:
            self.fit_label.setText(
                "No active profile yet: the engine times this machine once it is idle "
                "(or run `ragdoll profile --active`)."
            )
        else:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(fit.measured_at))
            notes = "; ".join(fit.notes)
            if fit.r2 is not None and fit.r2 < NOISY_R2:
                # A poor fit is usually a busy machine, not a strange model.
                notes = "; ".join(
                    [*fit.notes, f"the points scatter (R² {fit.r2:.2f}): profile again when idle"]
                )
            self.fit_label.setText(
                f"Measured {when} for {fit.model or 'extractive mode'}: batch {fit.batch}, "
                f"{fit.resident_partitions} resident index partitions"
                + (f". {notes}" if notes else "")
            )

    def _fit_height(self) -> None:
        # The minimum height is still the one with the plot until the layout takes
        # the change in, and resize() never goes below it: the panel stayed 800 px.
        self._layout.activate()
        if self.height() > self.sizeHint().height():
            self.resize(self.width(), self.sizeHint().height())

    def _show_index(self, info: HardwareInfo) -> None:
        index = info.index
        if index is None:
            self.index_value.setText("not reported by this engine")
            return
        self.index_value.setText(
            f"{index.chunks:,} chunks: {gib(index.disk_bytes) if index.disk_bytes else 'nothing'} "
            f"on disk, {gib(index.resident_bytes) if index.resident_bytes else 'nothing'} "
            "held in memory for search now (measured)"
        )

    def _show_profile(self, p: HardwareSummary) -> None:
        if p.gpus:
            self.gpu_value.setText(
                "\n".join(
                    f"{g.name}{' (unified memory)' if g.unified_memory else ''}: "
                    f"{gib(g.free_bytes)} free of {gib(g.total_bytes)}; "
                    f"host→device {_rate(g.h2d_bytes_per_s)}"
                    for g in p.gpus
                )
            )
        else:
            self.gpu_value.setText("none: RAM computes, the disk holds what does not fit")
        self.ram_value.setText(
            f"{gib(p.ram_available_bytes)} available of {gib(p.ram_total_bytes)}"
        )
        self.disk_value.setText(
            f"{gib(p.disk_free_bytes)} free of {gib(p.disk_total_bytes)}; "
            f"read {_rate(p.disk_read_bytes_per_s)} ({p.disk_path})"
        )
        physical = f" ({p.cpu_cores_physical} physical)" if p.cpu_cores_physical else ""
        self.cores_value.setText(f"{p.cpu_cores_logical} logical cores{physical}; {p.platform}")

    def _show_placement(
        self,
        placement: PlacementSummary | None,
        *,
        profile: HardwareSummary,
        note: str | None,
        index: IndexUsage | None,
    ) -> None:
        if placement is None:
            self.placement_title.setText(note or "No placement.")
            capacities = {
                "gpu": sum(g.free_bytes for g in profile.gpus),
                "cpu": profile.ram_available_bytes,
                "disk": profile.disk_free_bytes,
            }
            budgets = dict.fromkeys(capacities, 0)
        else:
            fits = "fits" if placement.fits else f"does not fit: {placement.message}"
            self.placement_title.setText(
                f"{placement.model}, batch {placement.batch}: {fits}. "
                f"{placement.resident_partitions} index partitions resident."
                + (f" {note}" if note else "")
            )
            capacities = vars(placement.capacities)
            budgets = vars(placement.budgets)
        unified = placement is not None and placement.memory_model == "unified"
        titles = {"gpu": "Unified" if unified else "GPU", "cpu": "RAM", "disk": "Disk"}
        for tier, bar in self.bars.items():
            bar.set_data(
                title=titles[tier],
                segments=tier_segments(placement=placement, tier=tier, index=index),
                capacity=capacities[tier],
                budget=budgets[tier],
            )
        # No GPU: its bar would be an empty, zero-capacity line.
        self.bars["gpu"].setVisible(bool(profile.gpus) or unified)
