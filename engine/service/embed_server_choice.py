"""Choosing an embeddings server as the embedder, and opening it again from the settings.

The server is an embedder like any other to the switch (engine/rag/ingest/embedder_switch.py):
its id (`server:MODEL@URL`) is the `embedder` setting and the index's embedder id. What
that id cannot hold is kept here: the key in its own 0600 file (never in the settings,
the status or a log), and the CA file, batch and timeout as settings. A server is asked
once before it is kept (its dimension, engine/rag/ingest/server_embedder.py), so one that
does not answer is never saved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from engine.paths import Paths
from engine.rag.answer.server_client import (
    ServerAddressError,
    ServerEndpoint,
    ServerTimeouts,
    check_url,
)
from engine.rag.answer.server_key import EMBED_KEY_FILE, read_key, write_key
from engine.rag.ingest.embedder_switch import EmbedderSwitch
from engine.rag.ingest.server_embedder import ServerEmbedder
from engine.rag.ingest.server_embedder_id import EmbedServerRef, server_ref
from engine.rag.store.lance_store import LanceStore
from engine.service.embedder_in_force import EmbedderInForce
from engine.service.settings import SettingsFile
from engine.wire import EmbedServerInfo, EngineSettings


@dataclasses.dataclass(frozen=True, kw_only=True)
class EmbedServerChosen:
    """A server checked and ready for the switch: the embedder (asked once), the
    settings to keep once the switch has taken it, and its key."""

    embedder: ServerEmbedder
    settings: EngineSettings
    api_key: str | None

    def __repr__(self) -> str:  # the key never shows, whoever prints this
        return f"EmbedServerChosen(embedder={self.embedder.info.id!r})"


class EmbedServerChoice:
    def __init__(
        self,
        *,
        paths: Paths,
        settings: SettingsFile,
        store: LanceStore,
        switch: EmbedderSwitch,
        in_force: EmbedderInForce,
    ) -> None:
        self._paths = paths
        self._settings = settings
        self._store = store
        self._switch = switch
        self._in_force = in_force

    def choose(
        self,
        *,
        url: str,
        model: str,
        api_key: str | None = None,
        ca_file: str | None = None,
        batch: int | None = None,
        timeout_s: float | None = None,
    ) -> EngineSettings:
        """Embed on the server: asked once first (one that does not answer is never
        saved), then the collection is re-embedded by it while the current index
        answers; the text of the documents goes to it from then on. Raises
        ServerAddressError, EmbeddingServerError or ValueError."""
        chosen = self.check(
            url=url, model=model, api_key=api_key, ca_file=ca_file, batch=batch, timeout_s=timeout_s
        )
        name = self._switch.choose(name=chosen.embedder.info.id, embedder=chosen.embedder)
        meta = self._store.meta
        if meta is not None and meta.embedder_id == name:
            # The same server in force: its new key, batch or timeout apply at once.
            self._in_force.swap(chosen.embedder)
        return self.keep(chosen)

    def open(self, ref: EmbedServerRef) -> ServerEmbedder:
        """The server `ref` names, with the stored key and the settings' CA file,
        batch and timeout. Raises EmbeddingServerError."""
        settings = self._settings.current
        return ServerEmbedder(
            endpoint=self._endpoint(ref=ref, settings=settings, api_key=self._stored_key()),
            batch=settings.embed_server_batch,
        )

    def check(
        self,
        *,
        url: str,
        model: str,
        api_key: str | None = None,
        ca_file: str | None = None,
        batch: int | None = None,
        timeout_s: float | None = None,
    ) -> EmbedServerChosen:
        """The server asked once with these settings. `api_key` None keeps the stored
        key for the server in use, "" means none. Raises ServerAddressError for an
        address or CA file that is no use, EmbeddingServerError when the server fails."""
        url = check_url(url)
        model = model.strip()
        if not model:
            raise ValueError("name the model the embeddings server should use")
        if ca_file and not Path(ca_file).expanduser().is_file():
            raise ServerAddressError(f"no CA file at {ca_file}")
        if batch is not None and not 1 <= batch <= 2048:
            raise ValueError("the batch must be between 1 and 2048 texts")
        if timeout_s is not None and not 1 <= timeout_s <= 3600:
            raise ValueError("the timeout must be between 1 and 3600 s")
        current = self._settings.current
        if api_key is None:
            in_use = server_ref(current.embedder)
            api_key = self._stored_key() if in_use is not None and in_use.url == url else None
        settings = dataclasses.replace(
            current,
            embed_server_ca_file=str(Path(ca_file).expanduser()) if ca_file else None,
            embed_server_batch=batch or current.embed_server_batch,
            embed_server_timeout_s=timeout_s or current.embed_server_timeout_s,
        )
        ref = EmbedServerRef(url=url, model=model)
        embedder = ServerEmbedder(
            endpoint=self._endpoint(ref=ref, settings=settings, api_key=api_key or None),
            batch=settings.embed_server_batch,
        )
        return EmbedServerChosen(
            embedder=embedder,
            settings=dataclasses.replace(settings, embedder=embedder.info.id),
            api_key=api_key or None,
        )

    def keep(self, chosen: EmbedServerChosen) -> EngineSettings:
        """The checked server saved as the embedder (after the switch took it)."""
        write_key(config=self._paths.config, key=chosen.api_key, name=EMBED_KEY_FILE)
        return self._settings.keep(chosen.settings)

    def forget_key_unless(self, *, needed: Iterable[str | None]) -> None:
        """Delete the key unless one of these embedders (the chosen one, the index's)
        is a server: a key is kept only while a server may be asked."""
        if not any(name and server_ref(name) is not None for name in needed):
            write_key(config=self._paths.config, key=None, name=EMBED_KEY_FILE)

    def info(self, *, in_force: str | None) -> EmbedServerInfo | None:
        """The server the collection's text goes to: the index's, else the chosen one's."""
        settings = self._settings.current
        forced = server_ref(in_force) if in_force else None
        ref = forced or server_ref(settings.embedder)
        if ref is None:
            return None
        return EmbedServerInfo(
            url=ref.url,
            model=ref.model,
            batch=settings.embed_server_batch,
            in_force=forced is not None,
        )

    def _stored_key(self) -> str | None:
        return read_key(config=self._paths.config, name=EMBED_KEY_FILE)

    @staticmethod
    def _endpoint(
        *, ref: EmbedServerRef, settings: EngineSettings, api_key: str | None
    ) -> ServerEndpoint:
        timeout = settings.embed_server_timeout_s
        return ServerEndpoint(
            url=ref.url,
            model=ref.model,
            api_key=api_key,
            ca_file=settings.embed_server_ca_file,
            timeouts=ServerTimeouts(first_token_s=timeout, idle_s=timeout),
        )
