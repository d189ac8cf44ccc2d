"""The language model in use, and choosing it: a local model, a model server, or none.

`engine.models` (engine/service/core.py): the server's routes for the model and the
model server call it. A model is loaded before it is saved as the setting, so a model
that does not load (or a server that does not answer, or does not serve the model) is
never kept. With no model, answers are extractive. The modules that load a model
(torch, the executor, an HTTP client) are imported when one is loaded: an engine
without a language model starts without them.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from engine.paths import Paths
from engine.rag.store.lance_store import LanceStore
from engine.runtime.planner.placement import Placement, StoreSpec
from engine.service.settings import SettingsFile
from engine.wire import EngineSettings, ModelServerInfo

if TYPE_CHECKING:
    from engine.rag.answer.in_use import ModelInUse
    from engine.rag.answer.server_client import ServerEndpoint


class ModelChoice:
    def __init__(
        self,
        *,
        paths: Paths,
        settings: SettingsFile,
        store: LanceStore,
        planner_store: Callable[[], StoreSpec],
        on_change: Callable[[], None],
    ) -> None:
        """`planner_store()`: the index as the planner sees it, planned beside a local
        model; `on_change()`: called after the model in use changed (the serving
        pipelines hand their waiting questions to the new one)."""
        self._paths = paths
        self._settings = settings
        self._store = store
        self._planner_store = planner_store
        self._on_change = on_change
        self._model: ModelInUse | None = None
        self._error: str | None = None  # why the chosen model is not in use
        self._lock = threading.Lock()

    # -- reading -----------------------------------------------------------------------

    def current(self) -> ModelInUse | None:
        """The language model answering now and the owner of its placement."""
        return self._model

    def error(self) -> str | None:
        """Why the model in the settings is not in use (its load failed), if it is not."""
        return self._error

    def placement(self) -> Placement | None:
        """The placement in force of the model in use (None: no language model), as its
        owner reports it: after an out-of-memory recovery, the demoted one."""
        m = self._model
        return m.owner.placement if m is not None and m.owner is not None else None

    def server_info(self) -> ModelServerInfo | None:
        """The model server generating now (its key is never part of it)."""
        settings = self._settings.current
        if not settings.server_url:
            return None
        model = self._model
        answerer = model.answerer if model is not None and model.remote else None
        return ModelServerInfo(
            url=settings.server_url,
            model=settings.server_model or "",
            concurrency=settings.server_concurrency,
            first_token_ms=answerer.first_token_ms() if answerer is not None else None,  # type: ignore[union-attr]
            cached_tokens=getattr(answerer, "last_cached_tokens", None),
        )

    # -- loading -----------------------------------------------------------------------

    def load_chosen(self) -> None:
        """The model in the settings, at the engine's start: the model server when one is
        set, else the local model, else nothing. Raises what the load raises."""
        settings = self._settings.current
        if settings.server_url:
            self._load_server()
        elif settings.model:
            self._load_local(settings.model, weights=settings.model_weights)

    def failed(self, message: str) -> None:
        """The start's load failed: the status says why; answers stay extractive."""
        self._error = message

    def _load_local(self, model: str, *, weights: str) -> ModelInUse:
        from engine.rag.answer.in_use import open_model
        from engine.runtime.models.compress import compute_dtype_of, weights_folder
        from engine.runtime.models.resolve import resolve_model_path

        with self._lock:
            path = resolve_model_path(model=model, app_cache=self._paths.cache)
            path = weights_folder(folder=path, weights=weights, cache=self._paths.cache)
            # One plan and one owner for the model's tiers and the index's budget (§4.2).
            in_use = open_model(
                model_path=path,
                dtype=compute_dtype_of(weights),
                store=self._planner_store,
                index=self._store,
                paths=self._paths,
                decode_at_load=weights == "auto",  # a chosen int8 / int4 stays so
            )
            self._model, self._error = in_use, None
        self._on_change()  # the next question builds pipelines for this model
        return in_use

    def _server_endpoint(self, settings: EngineSettings) -> ServerEndpoint:
        from engine.rag.answer.server_client import ServerEndpoint, ServerTimeouts
        from engine.rag.answer.server_key import read_key

        return ServerEndpoint(
            url=settings.server_url or "",
            model=settings.server_model or "",
            api_key=read_key(config=self._paths.config),
            ca_file=settings.server_ca_file,
            timeouts=ServerTimeouts(first_token_s=settings.server_first_token_s),
        )

    def _load_server(self) -> ModelInUse:
        from engine.rag.answer.server_model import open_server

        settings = self._settings.current
        with self._lock:
            in_use = open_server(
                endpoint=self._server_endpoint(settings),
                concurrency=settings.server_concurrency,
            )
            self._model, self._error = in_use, None
        self._on_change()
        return in_use

    # -- choosing ----------------------------------------------------------------------

    def set_model(self, *, model: str | None, weights: str | None = None) -> EngineSettings:
        """Load the model first: a model that does not load is never saved.
        `weights` (None: the setting's) says how its weights are held."""
        from engine.rag.answer.server_key import write_key
        from engine.runtime.models.compress import check_weights

        weights = check_weights(weights or self._settings.current.model_weights)
        if model:
            model = os.path.expanduser(model)
            self._load_local(model, weights=weights)
        else:
            with self._lock:
                self._model = None
            self._on_change()
        # A local model (or none) chosen: generation leaves the model server, and its
        # key is kept only while it is in use.
        settings = self._settings.change(
            model=model or None, model_weights=weights, server_url=None
        )
        write_key(config=self._paths.config, key=None)
        return settings

    def set_model_server(
        self,
        *,
        url: str | None,
        model: str | None = None,
        api_key: str | None = None,
        ca_file: str | None = None,
        concurrency: int | None = None,
        first_token_s: float | None = None,
    ) -> EngineSettings:
        """Generate on an OpenAI-compatible server (`url` None: back to the local model
        or extractive answers). The server is checked first (it answers, it serves
        `model`): one that does not is never saved. `api_key`: None keeps the stored
        key for the same server, "" removes it; it goes to a 0600 file, not the settings."""
        from engine.rag.answer.server_client import ServerAddressError, check_url
        from engine.rag.answer.server_key import read_key, write_key
        from engine.rag.answer.server_model import open_server

        current = self._settings.current
        if not url:
            return self.set_model(model=current.model)
        url = check_url(url)
        if ca_file and not Path(ca_file).expanduser().is_file():
            raise ServerAddressError(f"no CA file at {ca_file}")
        if concurrency is not None and not 1 <= concurrency <= 256:
            raise ValueError("concurrency must be between 1 and 256")
        if first_token_s is not None and not 1 <= first_token_s <= 3600:
            raise ValueError("the first-token timeout must be between 1 and 3600 s")
        key = api_key
        if key is None:
            key = read_key(config=self._paths.config) if url == current.server_url else None
        changed = dataclasses.replace(
            current,
            server_url=url,
            server_model=(model or "").strip() or None,
            server_ca_file=str(Path(ca_file).expanduser()) if ca_file else None,
            server_concurrency=concurrency or current.server_concurrency,
            server_first_token_s=first_token_s or current.server_first_token_s,
        )
        endpoint = dataclasses.replace(self._server_endpoint(changed), api_key=key or None)
        with self._lock:
            in_use = open_server(endpoint=endpoint, concurrency=changed.server_concurrency)
            write_key(config=self._paths.config, key=key)
            self._model, self._error = in_use, None
        self._on_change()
        return self._settings.keep(changed)

    def server_models(
        self, *, url: str, api_key: str | None = None, ca_file: str | None = None
    ) -> list[str]:
        """The ids a server lists at /v1/models (`api_key` None: the stored key, for
        the server in use). Raises ModelServerError."""
        from engine.rag.answer.server_client import ServerEndpoint, check_url, list_models
        from engine.rag.answer.server_key import read_key

        settings = self._settings.current
        url = check_url(url)
        same = url == settings.server_url
        if api_key is None and same:
            api_key = read_key(config=self._paths.config)
        endpoint = ServerEndpoint(
            url=url,
            api_key=api_key or None,
            ca_file=ca_file or (settings.server_ca_file if same else None),
        )
        return [m.id for m in list_models(endpoint=endpoint)]
