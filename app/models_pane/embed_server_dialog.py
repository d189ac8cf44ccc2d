"""Model → Use an embeddings server…: an OpenAI-compatible `/v1/embeddings` endpoint
(vLLM, Ollama, Hugging Face TEI, llama.cpp's server) embeds the collection and the
questions; the index, retrieval and answers stay here.

The model server's dialog (app/models_pane/server_dialog.py) with its own words: it says
plainly, before anything is sent, that the text of every document goes to the server;
its "requests at once" becomes the texts a request. The choice goes through the engine,
which asks the server once (its dimension) before saving, then re-embeds the collection
in the background while the current index answers; a refusal is shown in place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QWidget

from app.models_pane.server_dialog import ServerDialog
from app.models_pane.server_flow import ServerDialogFlow
from app.qt_compat import emit
from engine.rag.ingest.server_embedder_id import server_ref
from engine.wire import EngineSettings

if TYPE_CHECKING:
    from app.engine_bridge import EngineBridge

EMBED_SENT_NOTICE = (
    "The text of your documents (every passage of every file, now and as files are "
    "added) and your questions are sent to this server to be embedded. Your files and "
    "the index stay on this machine. The collection is re-embedded in the background; "
    "the current index answers meanwhile. Use only a server you trust."
)
DEFAULT_BATCH = EngineSettings().embed_server_batch


@dataclass(frozen=True, kw_only=True)
class EmbedServerPick:
    """What the person filled in (the key, when typed, is sent once to the engine,
    which keeps it in a file only they can read)."""

    url: str
    model: str
    api_key: str | None
    ca_file: str | None
    batch: int


class EmbedServerDialog(ServerDialog):
    """Emits `sig_list_requested(url, key, ca_file)` and `sig_use_requested(EmbedServerPick)`."""

    def __init__(
        self,
        *,
        choose_ca_file: Callable[[QWidget], str | None] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(choose_ca_file=choose_ca_file, parent=parent)
        self.setWindowTitle("Use an embeddings server")
        self.setObjectName("embedServerDialog")
        self.url.setPlaceholderText(
            "http://gpu-box:8000 (vLLM, TEI), http://localhost:11434 (Ollama)"
        )
        self.notice.setText(EMBED_SENT_NOTICE)
        self.use_button.setText("Send the documents' text to this server")
        # The model dialog's requests-at-once row holds the texts sent in one request.
        self.batch = self.concurrency
        self.batch.setRange(1, 2048)
        self.batch.setValue(DEFAULT_BATCH)
        self.batch.setAccessibleName("Texts a request")
        self.batch.setToolTip("Passages sent in one request; lower it for a small server")
        label = self.form.labelForField(self.batch)
        if isinstance(label, QLabel):
            label.setText("Texts a request")

    def show_settings(self, settings: EngineSettings) -> None:
        """Fill in the embeddings server chosen (never its key)."""
        ref = server_ref(settings.embedder)
        if ref is not None:
            self.url.setText(ref.url)
            self.model.setCurrentText(ref.model)
            self.ca_file.setText(settings.embed_server_ca_file or "")
            self.batch.setValue(settings.embed_server_batch)
            self.key.setPlaceholderText("leave empty to keep the stored key")

    def pick(self) -> EmbedServerPick:
        choice = self.choice()
        return EmbedServerPick(
            url=choice.url,
            model=choice.model,
            api_key=choice.api_key,
            ca_file=choice.ca_file,
            batch=self.batch.value(),
        )

    def _use(self) -> None:
        pick = self.pick()
        if pick.url and pick.model:
            self._busy(True)
            self.error.hide()
            emit(self.sig_use_requested, pick)


def attach_embed_server_dialog(
    *,
    bridge: EngineBridge,
    open_signal: Signal,
    parent: QWidget,
    dialog_factory: Callable[[QWidget], EmbedServerDialog] | None = None,
) -> Callable[[], EmbedServerDialog | None]:
    """Wire the dialog (opened by `open_signal`) to the engine. Returns the dialog
    open now, if any (for tests)."""
    flow: ServerDialogFlow[EmbedServerDialog, EmbedServerPick] = ServerDialogFlow(
        bridge=bridge,
        open_signal=open_signal,
        parent=parent,
        make=dialog_factory or (lambda p: EmbedServerDialog(parent=p)),
        what="Using the embeddings server",
        send=lambda c, pick: c.set_embedder_server(
            url=pick.url,
            model=pick.model,
            api_key=pick.api_key,
            ca_file=pick.ca_file,
            batch=pick.batch,
        ),
    )
    return lambda: flow.dialog
