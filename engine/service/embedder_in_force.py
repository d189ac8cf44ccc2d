"""The embedder in force: the one the index was built with, loaded once.

While a switch to another embedder re-embeds the collection (EmbedderSwitch,
engine/rag/ingest/embedder_switch.py), questions and ingestion still use the old one;
the switch swaps it here under the store's write lock when the new index is in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

from engine.environ import EngineEnviron
from engine.errors import EmbedderError, LoadStopped, StaleVectorsError
from engine.paths import Paths
from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale
from engine.rag.ingest.embedder import DEFAULT_EMBEDDER, Embedder, scores_sentences
from engine.rag.ingest.embedder_switch import EmbedderSwitch
from engine.rag.ingest.server_embedder_id import EmbedServerRef, server_ref
from engine.rag.pipeline.adapters import STALE_TRIES
from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import SearchFilters, SearchHit
from engine.runtime.planner.placement import Placement

log = logging.getLogger(__name__)


class EmbedderInForce:
    def __init__(
        self,
        *,
        paths: Paths,
        environ: EngineEnviron,
        store: LanceStore,
        chosen: Callable[[], str],
        placement: Callable[[], Placement | None],
        closing: threading.Event,
        open_server: Callable[[EmbedServerRef], Embedder] | None = None,
    ) -> None:
        """`open_server`: an embeddings server named by an embedder id (`server:MODEL@URL`),
        opened with its key and settings (engine/service/embed_server_choice.py)."""
        self._open_server = open_server
        self._paths = paths
        self._closing = closing  # set: loads stop between their steps
        self._environ = environ  # the embedder back-end, cache and int8 it asks for
        self._store = store
        self._chosen = chosen  # the settings' embedder
        self._placement = placement
        self._embedder: Embedder | None = None
        self._bundled: Embedder | None = None  # scores sentences for another index embedder
        self._lock = threading.Lock()  # one load at a time
        self._swap_lock = threading.Lock()  # never held while waiting for anything else
        self._swaps = 0
        self._switch: EmbedderSwitch | None = None
        # The ingestion queue's worker starts before the switch exists and may
        # resume a job that needs the embedder: it waits for attach().
        self._attached = threading.Event()

    def attach(self, switch: EmbedderSwitch) -> None:
        """The switch, built after this (it calls `load` and `swap`)."""
        self._switch = switch
        self._attached.set()

    def get(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                swaps = self._swaps
                loaded = self._load_in_force(swaps=swaps)  # seconds: a switch may finish
                with self._swap_lock:
                    if self._swaps == swaps:  # else the swap's embedder stays
                        self._embedder = loaded
            return self._embedder

    def load(self, model: str) -> Embedder:
        ref = server_ref(model)
        if ref is not None:
            if self._open_server is None:
                raise EmbedderError(f"{model} names an embeddings server; none can be asked here")
            return self._open_server(ref)
        # With a model in use, the embedder takes the GPU only if that model's
        # placement leaves it room (without one: the GPU's free memory).
        return Embedder(
            model=model,
            placement=self._placement(),
            cache_dir=self._paths.cache / "embedders",
            environ=self._environ,
            stop=self._closing.is_set,
            app_cache=self._paths.cache,
        )

    def swap(self, embedder: Embedder) -> None:
        """Called under the store's write lock, as the index swaps to the new
        vectors: from here on questions are embedded by the new model."""
        with self._swap_lock:
            self._embedder = embedder
            self._swaps += 1

    def embed(self, texts: list[str]) -> np.ndarray:
        """Questions' vectors, by the embedder of the index in force at the call."""
        return self.get().embed(texts)

    def embed_sentences(self, texts: list[str]) -> np.ndarray:
        """An answer's sentences (and the question beside them), by the embedder the
        sentence choice was fitted on (`scores_sentences`): the index's when it is the
        bundled one, else the bundled one, loaded on first use."""
        embedder = self.get()
        if scores_sentences(embedder):
            return embedder.embed(texts)
        bundled = self._bundled
        if bundled is None:  # the load lock only until it is loaded: this is every answer
            with self._lock:
                if self._bundled is None:
                    self._bundled = self.load(DEFAULT_EMBEDDER)
                bundled = self._bundled
        return bundled.embed(texts)

    def sentence_scale(self) -> SemanticScale:
        """The scale of the embedder `embed_sentences` uses now (semantic_scale.py)."""
        embedder = self.get()
        return embedder.semantic_scale() if scores_sentences(embedder) else IDENTITY

    def ordinary_word(self, word: str) -> bool:
        """Whether the embedder in force reads `word` as an ordinary word of some
        language (`Embedder.ordinary_word`)."""
        return self.get().ordinary_word(word)

    def embed_tagged(self, texts: list[str]) -> tuple[np.ndarray, str]:
        """`embed` with the id of the embedder that made the vectors: a search
        checks it against the index's (a swap may come in between)."""
        embedder = self.get()
        return embedder.embed(texts), embedder.info.id

    def hybrid_search(self, *, text: str, k: int, filters: SearchFilters) -> list[SearchHit]:
        """The store's hybrid search for `text`, embedded again if the embedder
        was swapped between its embedding and the search."""
        for attempt in range(STALE_TRIES):
            vectors, made_by = self.embed_tagged([text])
            try:
                return self._store.hybrid_search(
                    vector=vectors[0], text=text, k=k, filters=filters, made_by=made_by
                )
            except StaleVectorsError:
                if attempt == STALE_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _load_in_force(self, *, swaps: int) -> Embedder:
        self._attached.wait()
        assert self._switch is not None
        embedder = self._switch.load_in_force(chosen=self._chosen())
        if embedder is not None:
            return embedder
        embedder = self.load(self._chosen())
        if self._closing.is_set():  # the store is closing: the next start records it
            raise LoadStopped("the engine closed while the embedder loaded")
        with self._store.exclusive():
            # A switch that put another embedder's index in force while this one loaded
            # (a new user choosing the multilingual embedder during the first warm-up)
            # decided the index: re-embedding it for this one left the index of one
            # embedder and questions asked with the other, refused as stale.
            if self._swaps != swaps:
                return embedder  # `get` keeps the swapped one
            stale = self._store.ensure_embedder(
                embedder_id=embedder.info.id, dimension=embedder.info.dimension
            )
        if stale:
            self._reembed(embedder)
        return embedder

    def _reembed(self, embedder: Embedder) -> None:
        old = self._store.meta
        log.warning(
            "the embedder changed from %s to %s: re-embedding every chunk",
            old.embedder_id if old else "?",
            embedder.info.id,
        )
        for done, total in self._store.reembed(
            embedder_id=embedder.info.id, dimension=embedder.info.dimension, embed=embedder.embed
        ):
            log.info("re-embedded %d of %d chunks", done, total)
