"""The Models dialog: recommended models with this machine's verdict and an expected
speed, downloads from the Hugging Face hub, a local folder, or extractive answers.

Everything it asks of the engine is an EngineOp the bridge runs off the GUI
thread; it only draws what the ops bring back. Nothing is downloaded unless the person
presses Download, and the button says where the files come from.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.bridge_plumbing import EngineOp, describe_error
from app.engine_bridge import EngineBridge
from app.models_pane.download_follow import follow_download
from app.models_pane.model_chooser import FolderChooser, ModelChooser, choose_model_dialog
from app.qt_compat import emit
from app.screen_fit import resize_within_screen
from engine.runtime.planner.sizes import format_gib
from engine.wire import (
    FINAL_STATES,
    EngineStatus,
    GGUFVariantAdvice,
    ModelAdvice,
    ModelDownload,
    RecommendedModels,
)

DOWNLOAD_POLL_S = 0.5  # how often a download in progress is asked about
COLUMNS = (
    "Model",
    "Parameters",
    "Download",
    "On this machine",
    "Expected speed",
    "Installed",
    "Licence",
)


def params_text(params: int) -> str:
    return f"{params / 1e9:.1f} B" if params >= 1e9 else f"{params / 1e6:.0f} M"


def speed_text(advice: ModelAdvice) -> str:
    if advice.role == "reranker":
        per = advice.seconds_per_question
        if per is None:
            return "—"
        return f"≈ {per:.1f} s per question" if per >= 0.1 else "< 0.1 s per question"
    s = advice.expected_tokens_per_s
    if s is None:
        return "—"
    if s >= 10:
        return f"≈ {s:.0f} tokens/s"
    if s >= 0.1:
        return f"≈ {s:.1f} tokens/s"
    return f"≈ {1 / s:.0f} s per token"


def download_text(n_bytes: int) -> str:
    """In decimal GB, as the hub lists file sizes, so that the two can be compared."""
    if n_bytes <= 0:
        return "—"
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:.0f} MB"


def size_text(n_bytes: int) -> str:
    return format_gib(n_bytes) if n_bytes >= 2**30 else f"{n_bytes / 2**20:.1f} MiB"


def progress_text(d: ModelDownload) -> str:
    name = f"{d.repo_id}/{d.file}" if d.file else d.repo_id
    size = size_text(d.bytes_done)
    if d.bytes_total:
        size += f" of {size_text(d.bytes_total)}"
    files = f"file {min(d.files_done + 1, d.files_total)} of {d.files_total}"
    if d.state == "done":
        return f"Downloaded {name} ({size}) to {d.folder}"
    if d.state == "cancelled":
        return f"Cancelled {name} at {size}; Download resumes where it stopped."
    if d.state == "failed":
        return f"Download of {name} failed: {d.error}"
    resumed = f", {size_text(d.bytes_resumed)} resumed" if d.bytes_resumed else ""
    return f"Downloading {name}: {size}{resumed} ({files})"


def gguf_text(m: ModelAdvice) -> str:
    """The model's GGUF files, one line each (empty when it has none)."""
    lines = [
        f"\nGGUF {v.quant}: {v.repo}/{v.file}, {v.note.split(': ', 1)[-1]}; {v.verdict}"
        + (" (downloaded)" if v.installed_path else "")
        for v in m.gguf_variants
    ]
    return "".join(lines)


def gguf_summary(m: ModelAdvice | None) -> str:
    """The selected model's GGUF files in one line under the table, where a tooltip
    alone would hide them (empty when it has none)."""
    if m is None or not m.gguf_variants:
        return ""
    parts = [
        f"{v.quant} {download_text(v.file_bytes)}: {v.verdict}"
        + (" (downloaded)" if v.installed_path else "")
        for v in m.gguf_variants
    ]
    return f"GGUF files of {m.name} (llama.cpp's format, smaller): " + "; ".join(parts)


def gguf_to_download(m: ModelAdvice | None) -> GGUFVariantAdvice | None:
    """The GGUF file "Download GGUF" fetches: the first not on disk (the smallest
    format is listed first)."""
    if m is None:
        return None
    return next((v for v in m.gguf_variants if not v.installed_path), None)


def use_text(m: ModelAdvice | None) -> str:
    return "Use to rank sources" if m is not None and m.role == "reranker" else "Use this model"


def usable_path(m: ModelAdvice) -> str | None:
    """What "Use this model" chooses: the model itself when installed, else a GGUF file
    of it already on disk (its variants are listed smallest format first)."""
    if m.installed:
        return m.installed_path or m.id
    return next((v.installed_path for v in m.gguf_variants if v.installed_path), None)


class ModelsDialog(QDialog):
    """Emits `sig_model_requested` with a folder or repo id, or None for extractive;
    `sig_reranker_requested` with a reranker's folder or repo id."""

    sig_model_requested = Signal(object)  # str | None
    sig_reranker_requested = Signal(str)

    def __init__(
        self,
        *,
        bridge: EngineBridge,
        choose_folder: FolderChooser = choose_model_dialog,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._bridge = bridge
        self._choose_folder = choose_folder
        self.models: list[ModelAdvice] = []
        self.download: ModelDownload | None = None
        self._in_use: tuple[str | None, str | None] | None = None  # (model, reranker)
        self.setWindowTitle("Models")
        self.setObjectName("modelsDialog")
        resize_within_screen(widget=self, width=1100, height=460)  # the licence column whole

        self.note = QLabel("Reading the recommendations…")
        self.note.setWordWrap(True)
        self.gguf_label = QLabel("")
        self.gguf_label.setWordWrap(True)
        self.gguf_label.setAccessibleName("GGUF files of the selected model")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setAccessibleName("Recommended models")
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        # Licences run long ("… (gated: accept the terms on huggingface.co)"): wrap them.
        self.table.setWordWrap(True)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.table.doubleClicked.connect(lambda _index: self.use_selected())

        self.progress = QProgressBar()
        self.progress.setAccessibleName("Download progress")
        self.progress.setVisible(False)
        self.progress_label = QLabel("")
        self.progress_label.setWordWrap(True)

        self.use_button = self._button("Use this model", "Answer with the selected model")
        self.download_button = self._button(
            "Download", "Download the selected model from huggingface.co (only when you ask)"
        )
        self.gguf_download_button = self._button(
            "Download GGUF", "Download the selected model's GGUF file from huggingface.co"
        )
        self.cancel_button = self._button("Cancel download", "Stop; a later Download resumes")
        self.folder_button = self._button("Use a local folder…", "Choose a model folder")
        self.extractive_button = self._button(
            "Extractive (no model)", "Answers quote the passages that match best"
        )
        self.refresh_button = self._button("Refresh", "Plan the recommendations again")
        self.use_button.clicked.connect(self.use_selected)
        self.download_button.clicked.connect(self.download_selected)
        self.gguf_download_button.clicked.connect(self.download_selected_gguf)
        self.cancel_button.clicked.connect(self.cancel_download)
        self.folder_button.clicked.connect(self.choose_folder)
        self.extractive_button.clicked.connect(self.use_extractive)
        self.refresh_button.clicked.connect(self.refresh)

        buttons = QHBoxLayout()
        for b in (self.use_button, self.download_button, self.cancel_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        for b in (self.folder_button, self.extractive_button, self.refresh_button):
            buttons.addWidget(b)
        layout = QVBoxLayout(self)
        layout.addWidget(self.note)
        layout.addWidget(self.table, 1)
        # The GGUF files' own row: one more button beside the others would make the
        # dialog wider than an 800-pixel screen.
        gguf_row = QHBoxLayout()
        gguf_row.addWidget(self.gguf_label, 1)
        gguf_row.addWidget(self.gguf_download_button)
        layout.addLayout(gguf_row)
        layout.addWidget(self.progress)
        layout.addWidget(self.progress_label)
        layout.addLayout(buttons)

        self._update_buttons()

    def _button(self, text: str, tip: str) -> QPushButton:
        b = QPushButton(text)
        b.setToolTip(tip)
        b.setAccessibleName(text.rstrip("…"))
        return b

    # -- engine results -----------------------------------------------------------

    def refresh(self) -> None:
        self.note.setText("Reading the recommendations…")
        self._bridge.run(
            EngineOp(
                what="Reading the recommended models",
                call=lambda c: c.recommended_models(),
                success=self.show_models,
                failure=lambda e: self.show_error(describe_error(error=e)),
            )
        )

    def show_models(self, result: RecommendedModels) -> None:
        selected = self.selected()
        self.models = list(result.models)
        self.note.setText(result.hardware_note)
        self.table.setRowCount(len(self.models))
        for row, m in enumerate(self.models):
            gguf = any(v.installed_path for v in m.gguf_variants)
            installed = "yes" if m.installed else ("GGUF" if gguf else "no")
            installed = "in use" if m.chosen else installed
            cells = (
                m.name,
                params_text(m.params),
                download_text(m.download_bytes),
                m.verdict,
                speed_text(m),
                installed,
                m.licence,
            )
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, m.id)
                item.setToolTip(
                    f"{m.id}\n{m.description}\n{m.speed_note}\n{m.licence}" + gguf_text(m)
                )
                self.table.setItem(row, col, item)
            if selected is not None and m.id == selected.id:
                self.table.selectRow(row)
        self._update_buttons()

    def follow_status(self, status: EngineStatus) -> None:
        """Plan again when the model or the reranker in use changed while the dialog is
        open: its "in use" marks follow what the engine has, not what was asked."""
        in_use = (status.model, status.reranker)
        if in_use != self._in_use:
            self._in_use = in_use
            if self.isVisible():
                self.refresh()

    def show_error(self, message: str) -> None:
        self.note.setText(f"No recommendations: {message}")

    def show_download(self, state: ModelDownload) -> None:
        self.download = state
        self.progress.setVisible(True)
        total = state.bytes_total or 0
        self.progress.setRange(0, 1000 if total else 0)  # busy bar when the size is unknown
        if total:
            self.progress.setValue(int(1000 * state.bytes_done / total))
        self.progress_label.setText(progress_text(state))
        if state.state in FINAL_STATES:
            # Ended: a bar stays only to show how far a cancelled download got; a
            # busy bar (no size known) would go on moving after the end.
            self.progress.setVisible(state.state == "cancelled" and total > 0)
            if state.state == "done":
                self.refresh()  # it is installed now
        self._update_buttons()

    def _download_failed(self, repo_id: str, message: str) -> None:
        self.download = None
        self.progress.setVisible(False)
        self.progress_label.setText(f"Download of {repo_id} failed: {message}")
        self._update_buttons()

    # -- actions --------------------------------------------------------------------

    def selected(self) -> ModelAdvice | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(self.models):
            return None
        return self.models[rows[0].row()]

    def use_selected(self) -> None:
        m = self.selected()
        path = usable_path(m) if m is not None else None
        if path is None:
            return
        if m is not None and m.role == "reranker":
            emit(self.sig_reranker_requested, path)
        else:
            emit(self.sig_model_requested, path)

    def download_selected(self) -> None:
        m = self.selected()
        if m is not None:
            self._download(repo_id=m.id, file=None)

    def download_selected_gguf(self) -> None:
        v = gguf_to_download(self.selected())
        if v is not None:
            self._download(repo_id=v.repo, file=v.file)

    def _download(self, *, repo_id: str, file: str | None) -> None:
        if self._downloading():
            return
        name = f"{repo_id}/{file}" if file else repo_id
        self.progress_label.setText(f"Asking huggingface.co for {name}…")
        self._bridge.run(
            EngineOp(
                what="Downloading a model",
                follow=lambda c, report: follow_download(
                    client=c, repo_id=repo_id, file=file, report=report, poll_s=DOWNLOAD_POLL_S
                ),
                progress=self.show_download,
                success=self.show_download,
                failure=lambda e: self._download_failed(name, describe_error(error=e)),
            )
        )

    def cancel_download(self) -> None:
        if self.download is not None and self._downloading():
            download_id = self.download.download_id
            # The follower sees the cancelled state on its next poll.
            self._bridge.run(
                EngineOp(
                    what="Cancelling the download",
                    call=lambda c: c.cancel_download(download_id=download_id),
                )
            )

    def choose_folder(self) -> None:
        folder = self._choose_folder(self)
        if folder:
            emit(self.sig_model_requested, folder)

    def use_extractive(self) -> None:
        emit(self.sig_model_requested, None)

    def _downloading(self) -> bool:
        return self.download is not None and self.download.state not in FINAL_STATES

    def _update_buttons(self) -> None:
        m = self.selected()
        busy = self._downloading()
        self.use_button.setEnabled(m is not None and usable_path(m) is not None)
        self.use_button.setText(use_text(m))
        self.use_button.setToolTip(
            "Order each question's sources with the selected reranker"
            if m is not None and m.role == "reranker"
            else "Answer with the selected model"
        )
        self.gguf_label.setText(gguf_summary(m))
        self.gguf_label.setVisible(bool(self.gguf_label.text()))
        self.download_button.setEnabled(m is not None and not m.installed and not busy)
        self.cancel_button.setEnabled(busy)
        gguf = gguf_to_download(m)
        self.gguf_download_button.setEnabled(gguf is not None and not busy)
        self.gguf_download_button.setText(
            f"Download GGUF ({gguf.quant}, {download_text(gguf.file_bytes)})"
            if gguf is not None
            else "Download GGUF"
        )


def attach_models_dialog(
    *,
    chooser: ModelChooser,
    bridge: EngineBridge,
    choose_folder: FolderChooser = choose_model_dialog,
    parent: QWidget | None = None,
) -> ModelsDialog:
    """A Models dialog opened from the chooser's "Recommended models…" item; what the
    person picks there reaches whoever listens to `chooser.sig_model_requested`."""
    dialog = ModelsDialog(bridge=bridge, choose_folder=choose_folder, parent=parent)

    def open_dialog() -> None:
        dialog.show()
        dialog.raise_()
        dialog.refresh()

    chooser.models_action.triggered.connect(open_dialog)
    chooser.models_action.setVisible(True)
    dialog.sig_model_requested.connect(lambda model: emit(chooser.sig_model_requested, model))
    dialog.sig_reranker_requested.connect(lambda name: emit(chooser.sig_ranking_requested, name))
    bridge.sig_status.connect(dialog.follow_status)
    return dialog
