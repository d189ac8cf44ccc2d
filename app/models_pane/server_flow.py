"""The flow both server dialogs share (the model server's, server_dialog.py, and the
embeddings server's, embed_server_dialog.py): the dialog opened with the server in use,
its model list and the choice asked of the engine, never of the window."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from app.bridge_plumbing import EngineOp, describe_error
from app.models_pane.server_dialog import ServerDialog
from app.qt_compat import emit
from engine.wire import EngineSettings

if TYPE_CHECKING:
    from app.engine_bridge import EngineBridge
    from engine.service.client import EngineClient

D = TypeVar("D", bound=ServerDialog)
P = TypeVar("P")  # what the dialog's `sig_use_requested` carries


class ServerDialogFlow(Generic[D, P]):
    """A server dialog through the engine, the same for the model server's and the
    embeddings server's: opened by `open_signal` with the server in use filled in (never
    its key: the engine does not give it), its "List the server's models" and its choice
    (`send(client, pick)`, headlined `what`) asked of the engine, never of the window,
    since the engine holds the stored key and checks the server before saving. On the
    engine's yes the dialog closes and the settings go out as `sig_model_changed`; a
    refusal is shown in the dialog. `on_settings` hears every settings the engine gives."""

    def __init__(
        self,
        *,
        bridge: EngineBridge,
        open_signal: Signal,
        parent: QWidget,
        make: Callable[[QWidget], D],
        what: str,
        send: Callable[[EngineClient, P], EngineSettings],
        on_settings: Callable[[EngineSettings], object] | None = None,
    ) -> None:
        self._bridge = bridge
        self._parent = parent
        self._make = make
        self._what = what
        self._send = send
        self._on_settings = on_settings
        self.settings: EngineSettings | None = None  # the engine's, once read
        self.dialog: D | None = None  # the one opened last (for tests)
        bridge.sig_connected.connect(
            lambda _status: bridge.run(
                EngineOp(
                    what="Reading the settings",
                    call=lambda c: c.settings(),
                    success=self._settings_changed,
                )
            )
        )
        bridge.sig_model_changed.connect(self._settings_changed)
        open_signal.connect(self._open)

    def _open(self) -> None:
        dialog = self._make(self._parent)
        self.dialog = dialog
        if self.settings is not None:
            dialog.show_settings(self.settings)
        dialog.sig_list_requested.connect(
            lambda url, key, ca: self._list_models(dialog, url=url, key=key, ca=ca)
        )
        dialog.sig_use_requested.connect(lambda pick: self._use(dialog, pick))
        dialog.open()

    def _list_models(self, dialog: D, *, url: str, key: str | None, ca: str | None) -> None:
        self._bridge.run(
            EngineOp(
                what="Listing the server's models",
                call=lambda c: c.server_models(url=url, api_key=key, ca_file=ca),
                success=dialog.show_models,
                failure=lambda e: dialog.show_error(describe_error(error=e)),
            )
        )

    def _use(self, dialog: D, pick: P) -> None:
        def done(settings: EngineSettings) -> None:
            self.settings = settings
            dialog.accept()
            emit(self._bridge.sig_model_changed, settings)
            # The model chooser's labels name the server (and a re-embedding under way).
            self._bridge.refresh_status()

        self._bridge.run(
            EngineOp(
                what=self._what,
                call=lambda c: self._send(c, pick),
                success=done,
                failure=lambda e: dialog.show_error(describe_error(error=e)),
            )
        )

    def _settings_changed(self, settings: EngineSettings) -> None:
        self.settings = settings
        if self._on_settings is not None:
            self._on_settings(settings)
