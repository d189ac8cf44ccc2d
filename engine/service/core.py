"""The engine as a plain object: ingest, ask, look up sources, choose a model.

The HTTP server (engine/service/server.py) is a thin layer over this and its named sub-APIs:
`ingestion`, `library`, `system`, `each` (engine/service/facade.py), `models`, the
language model in use and choosing it (engine/service/model_choice.py), and
`embed_servers`, an embeddings server as the embedder (engine/service/embed_server_choice.py);
tests can call it in-process.
Heavy parts (the embedder, a language model) load lazily, in the background where
possible, so the engine answers /v1/status at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.environ import EngineEnviron
from engine.errors import ModelLoadError
from engine.paths import Paths
from engine.rag.answer.conversation import resolve
from engine.rag.answer.extractive import quoted_note
from engine.rag.answer.model_ranker import MODEL_RANKER
from engine.rag.answer.reranker import CandidateRanker
from engine.rag.answer.translation import translation_target
from engine.rag.answer.word_languages import (
    WordLanguages,
    either_ordinary,
    small_collection_ordinary,
)
from engine.rag.each.memo import EachMemo
from engine.rag.ingest.discovery import IgnoreRules
from engine.rag.ingest.embedder import Embedder
from engine.rag.ingest.embedder_offer import across_note
from engine.rag.ingest.embedder_switch import EmbedderSwitch
from engine.rag.ingest.jobs import IngestJob, IngestQueue
from engine.rag.ingest.journal import remove_orphans
from engine.rag.ingest.language import preload as preload_language_identifier
from engine.rag.ingest.pipeline import CommitPolicy
from engine.rag.ingest.sandbox import SandboxLimits
from engine.rag.ingest.server_embedder import EmbeddingServerError
from engine.rag.ingest.watcher import FolderChanges, FolderWatcher
from engine.rag.pipeline.answer_stream import answer_events
from engine.rag.pipeline.answering import NOT_FOUND_ANSWER as NOT_FOUND_ANSWER
from engine.rag.pipeline.follow_up import needs_rewrite
from engine.rag.pipeline.serving import ServingPipeline, retire
from engine.rag.pipeline.status_info import pipeline_info
from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import SearchFilters, SearchHit
from engine.runtime.planner.placement import DEFAULT_VECTOR_DIM, Placement, StoreSpec
from engine.runtime.planner.profiling import PowerLawFit, stored_generation_fit
from engine.service import library_view
from engine.service.embed_server_choice import EmbedServerChoice
from engine.service.embedder_in_force import EmbedderInForce
from engine.service.facade import EachAPI, IngestionAPI, LibraryAPI, SystemAPI
from engine.service.folders import FolderRegistry
from engine.service.model_choice import ModelChoice
from engine.service.profiling.auto_profile import AutoProfiler
from engine.service.profiling.engine_inputs import EngineProfilingInputs
from engine.service.question_languages import QuestionLanguages
from engine.service.ranker_choice import RankerChoice, setting_of
from engine.service.settings import SettingsFile
from engine.service.status_view import engine_status
from engine.service.work_in_hand import WorkInHand
from engine.wire import (
    AnswerEvent,
    DocumentInfo,
    EngineSettings,
    EngineStatus,
    FileError,
    IngestQueueState,
    PipelineInfo,
    Priority,
    SourceView,
    Turn,
    WatchedFolder,
)

if TYPE_CHECKING:
    from engine.rag.answer.generative import GenerationRecord, GenerativeAnswerer
    from engine.rag.answer.in_use import ModelInUse

log = logging.getLogger(__name__)
WARM_UP_WAIT_S = 120.0  # a first start exports the embedder to ONNX: tens of seconds under load
# The relevance gate runs on each question right after its batch's search: answering.py.


class Engine:
    def __init__(
        self,
        *,
        paths: Paths,
        warm_up: bool = True,
        watch: bool = True,
        environ: EngineEnviron | None = None,
    ) -> None:
        """`environ`: the environment variables read at the process's start (None: read
        now, as an in-process engine of a test or tool starts); each part gets its field."""
        self.environ = environ or EngineEnviron.from_environ()
        self.paths = paths.ensure()
        self._settings = SettingsFile(file=paths.settings_file)
        self.store = LanceStore(folder=paths.index_dir, scorer=self.environ.ivf_scorer)
        self.folders = FolderRegistry(file=paths.folders_file)
        self.question_languages = QuestionLanguages()  # what the embedder offer reads
        # Set by `close`: the warm-up and the loads it runs stop at their next step.
        self._closing = threading.Event()
        self.in_force = EmbedderInForce(
            paths=self.paths,
            environ=self.environ,
            store=self.store,
            chosen=lambda: self.settings.embedder,
            placement=self.placement,
            open_server=lambda ref: self.embed_servers.open(ref),
            closing=self._closing,
        )
        self.rankers = RankerChoice(paths=self.paths)  # the settings' (ranker_choice.py)
        # Made in the background at the gate's first need (word_languages.py).
        self.word_languages = WordLanguages(cache=self.environ.words_cache or self.paths.cache)
        # The language model in use, and choosing it (engine/service/model_choice.py).
        self.models = ModelChoice(
            paths=self.paths,
            settings=self._settings,
            store=self.store,
            planner_store=self.planner_store,
            on_change=self._drop_serving,
        )
        # Held while the model runs (a generation batch, an answer without retrieval,
        # a profiling sample): one thing at a time on the scarcest resource here.
        self._answer_lock = threading.Lock()
        # Answers without retrieval in hand (the pipeline counts its own requests).
        self._direct_answers = WorkInHand()
        # The two pipelines every answer goes through; built at the first question.
        self._serving: ServingPipeline | None = None
        self._serving_lock = threading.Lock()
        self._serving_profile: object = None  # profiler status the fit was read at
        # A killed engine may have left a new document's rows without its journal row.
        remove_orphans(store=self.store)
        self.ingest = IngestQueue(
            store=self.store,
            embedder=self.embedder,
            limits=SandboxLimits(
                time_s=self.settings.parse_time_limit_s, memory_mb=self.settings.parse_memory_mb
            ),
            rules=IgnoreRules(max_file_bytes=self.settings.max_file_mb * 1024 * 1024),
            pending_file=paths.data / "ingest-queue.json",
            accept=lambda p: self.folders.containing(path=p) is not None,
            # Questions get the cores first (engine/rag/ingest/priority.py).
            nice=self.environ.ingest_nice,
            commits=CommitPolicy.with_files(self.environ.ingest_commit_files),
        )
        self.embedders = EmbedderSwitch(
            store=self.store,
            queue=self.ingest,
            load=self.in_force.load,
            on_swap=self._swap_embedder,
            batch=self.environ.reembed_batch,
        )
        # An embeddings server as the embedder: its key and settings (embed_server_choice.py).
        self.embed_servers = EmbedServerChoice(
            paths=self.paths,
            settings=self._settings,
            store=self.store,
            switch=self.embedders,
            in_force=self.in_force,
        )
        meta = self.store.meta
        if meta is not None and meta.embedder_id != self.settings.embedder:
            # A switch chosen before the last exit: it goes on (before the rescan,
            # so that changed files are embedded once, by the new embedder).
            self.embedders.start(target=self.settings.embedder)
        self.in_force.attach(self.embedders)
        self.watcher = FolderWatcher(on_changes=self._on_folder_changes)
        self.rescan: IngestJob | None = None  # the start-up rescan, once submitted
        self.watching = threading.Event()  # set when every folder is watched
        if watch:
            threading.Thread(target=self._watch_all, name="engine-watch", daemon=True).start()
        profiling = EngineProfilingInputs(
            paths=self.paths,
            store=self.store,
            model_id=lambda: self.settings.model,
            model=self.models.current,
            model_lock=self._answer_lock,
            serving=lambda: self._serving,
            direct_answers=self._direct_answers,
            ingest=self.ingest,
        )
        self.profiler = AutoProfiler(paths=self.paths, inputs=profiling.current)
        # What the server calls besides the methods below (engine/service/facade.py).
        self.ingestion = IngestionAPI(queue=self.ingest)
        self.library = LibraryAPI(folders=self.folders)
        self.system = SystemAPI(
            paths=self.paths,
            store=self.store,
            profiler=self.profiler,
            chosen_model=lambda: self.settings.model,
            placement=self.placement,
            server=self.models.server_info,
        )
        self.each = EachAPI(
            store=self.store,
            folders=self.folders,
            memo=EachMemo(file=paths.data / "ask-each.json"),
            model=self.models.current,
            settings=lambda: self.settings,
            pipeline=lambda: self.serving().pipeline,
            unfinished=self.ingestion.unfinished,
            embed=self.in_force.embed_sentences,
            sentence_scale=self.in_force.sentence_scale,
        )
        self._warming: threading.Thread | None = None
        if warm_up:
            self._warming = threading.Thread(
                target=self._warm_up, name="engine-warm-up", daemon=True
            )
            self._warming.start()

    @property
    def settings(self) -> EngineSettings:
        """The settings in force (settings.json); the choices below change them."""
        return self._settings.current

    # -- lazily loaded parts and the settings that choose them -------------------

    def embedder(self) -> Embedder:
        """The embedder in force: the one the index was built with. While a
        switch to another re-embeds the collection, this is still the old one."""
        return self.in_force.get()

    def embed_in_force(self, texts: list[str]) -> np.ndarray:
        return self.in_force.embed(texts)

    def embed_tagged(self, texts: list[str]) -> tuple[np.ndarray, str]:
        return self.in_force.embed_tagged(texts)

    def set_embedder(self, *, embedder: str) -> EngineSettings:
        """Choose the embedder (the bundled one, a sentence-transformers folder, a model
        id in the Hugging Face cache); it is loaded first (one that does not load is never
        saved), then the collection is re-embedded while the current index answers."""
        name = self.embedders.choose(name=embedder)
        settings = self._settings.change(embedder=name)
        meta = self.store.meta
        self.embed_servers.forget_key_unless(needed=(name, meta.embedder_id if meta else None))
        return settings

    def _swap_embedder(self, embedder: Embedder) -> None:
        """The switch's new index is in: questions use its embedder from here on, and
        an embeddings server's key goes once no server is asked."""
        self.in_force.swap(embedder)
        self.embed_servers.forget_key_unless(needed=(self.settings.embedder, embedder.info.id))

    def set_reranker(self, *, reranker: str | None) -> EngineSettings:
        """None/"none", "model" (the language model in use ranks), or a cross-encoder,
        loaded first (one that does not load is never saved). Questions asked from
        now on are ranked so; any waiting go on with the pipelines they are in."""
        setting = setting_of(reranker, paths=self.paths)
        if setting and setting != MODEL_RANKER:
            self.rankers.cross_encoder(setting)
        settings = self._settings.change(reranker=setting)
        self._drop_serving()
        return settings

    def _warm_up(self) -> None:
        try:
            try:
                self.embedder()
            except EmbeddingServerError as e:  # a question asks it again; the model loads
                log.warning("the embeddings server is not answering: %s", e)
            if not self._closing.is_set():
                # An index built before the way words break changed (fulltext.py) is
                # built again now, not at the next file added; a no-op when current.
                self.store.refresh_fulltext_index()
            if not self._closing.is_set() and self.store.counts()[1] > 0:
                # Ready for the first question rather than made by it (word_languages.py).
                self.word_languages.start()
            if not self._closing.is_set():
                self.models.load_chosen()
            if not self._closing.is_set() and self.models.current() is not None:
                preload_language_identifier()  # the prompt names the question's language
        except Exception as e:  # shown in status; the engine keeps serving
            if self._closing.is_set():  # the store closed under it: not a failure
                log.info("warm-up stopped: the engine is closing (%s)", e)
                return
            log.exception("warm-up failed")
            self.models.failed(str(e))
        if self.environ.auto_profile and not self._closing.is_set():
            self.profiler.start()

    # -- reading -----------------------------------------------------------------------

    def status(self) -> EngineStatus:
        """GET /v1/status (engine/service/status_view.py)."""
        return engine_status(
            settings=self.settings,
            store=self.store,
            models=self.models,
            embedders=self.embedders,
            profiler=self.profiler,
            pipeline=self.pipeline_info(),
            embed_servers=self.embed_servers,
            asked=self.question_languages.heard(),
        )

    def pipeline_info(self) -> PipelineInfo | None:
        """Queues, batches, the placement in force, recent requests; None before
        the first question."""
        serving = self._serving
        if serving is None:
            return None
        return pipeline_info(status=serving.pipeline.status(), placement=serving.placement)

    def model_in_use(self) -> ModelInUse | None:
        """The language model answering now and the owner of its placement."""
        return self.models.current()

    def placement(self) -> Placement | None:
        """The placement in force of the model in use (None: no language model)."""
        return self.models.placement()

    def documents(self) -> list[DocumentInfo]:
        return library_view.documents(store=self.store)

    def errors(self) -> list[FileError]:
        return library_view.errors(store=self.store)

    def source(self, *, chunk_id: str) -> SourceView | None:
        return library_view.source(
            store=self.store,
            chunk_id=chunk_id,
            watched=lambda p: self.folders.containing(path=p) is not None,
        )

    # -- ingestion ------------------------------------------------------------------------

    def start_ingest(self, *, paths: list[str]) -> IngestJob:
        return self.ingest.submit(paths=paths)

    def _watch_all(self) -> None:
        """Watch every registered folder, then rescan them against the journal:
        what changed while the engine was off (or was pending when it was
        killed) is brought up to date; unchanged files cost one stat each."""
        folders = [Path(f.path) for f in self.folders.list()]
        for folder in folders:
            self.watcher.watch(folder=folder)
        present = [str(f) for f in folders if f.is_dir()]
        if present:
            self.rescan = self.ingest.submit_changes(paths=present, origin="rescan")
        self.watching.set()

    def _on_folder_changes(self, changes: FolderChanges) -> None:
        self.ingest.submit_changes(paths=changes.upserted, removed=changes.removed)

    def pause_ingest(self) -> IngestQueueState:
        return self.ingest.pause()

    def resume_ingest(self) -> IngestQueueState:
        return self.ingest.resume()

    def watch_folder(self, *, path: str, collection: str = "default") -> WatchedFolder:
        """Register a folder and follow its changes, without ingesting what is
        in it now (the caller does, or the next start's rescan). Raises like
        `add_folder`."""
        folder = self.folders.add(path=path, collection=collection)
        self.watcher.watch(folder=Path(folder.path))
        return folder

    def add_folder(
        self, *, path: str, collection: str = "default"
    ) -> tuple[WatchedFolder, IngestJob]:
        """Register a folder and index it. Raises FileNotFoundError or
        NotADirectoryError for a path that is not an existing folder."""
        folder = self.watch_folder(path=path, collection=collection)
        return folder, self.ingest.submit(paths=[folder.path])

    def remove_folder(self, *, path: str) -> WatchedFolder | None:
        """Forget a folder: its documents leave the index; the files are never touched."""
        removed = self.folders.remove(path=path)
        if removed is None:
            return None
        root = Path(removed.path)
        self.watcher.unwatch(folder=root)
        # Its jobs stop and what they wrote goes now, not at the next start.
        self.ingest.forget_folder(
            root=root, watched=lambda p: self.folders.containing(path=p) is not None
        )
        return removed

    # -- answering ------------------------------------------------------------------------

    def retrieve(
        self,
        *,
        question: str,
        k: int,
        folders: tuple[str, ...] = (),
        types: tuple[str, ...] = (),
    ) -> list[SearchHit]:
        """The top k chunks, only from `folders` (and below) and of file `types`
        (extensions) when given."""
        filters = SearchFilters(folders=tuple(folders), types=tuple(types))
        return self.in_force.hybrid_search(text=question, k=k, filters=filters)

    def ask_stream(
        self,
        *,
        question: str,
        k: int = 5,
        cancel: threading.Event | None = None,
        folders: tuple[str, ...] = (),
        types: tuple[str, ...] = (),
        priority: Priority = "interactive",
        history: Sequence[Turn] = (),
        max_new_tokens: int = 256,
    ) -> Iterator[AnswerEvent]:
        """SearchedEvent (a follow-up, or `leaned_search`), CitationsEvent, TokenEvent...,
        DoneEvent (engine/wire_events.py), batched with other questions; "interactive"
        (the chat a person watches) goes ahead of "background" work (batch, API), never
        starved. `history` resolves a follow-up before retrieval and goes into the prompt."""
        question = question.strip()
        if not question:
            raise ValueError("the question is empty")
        self.question_languages.note(question)
        serving = self.serving()
        follow_up = None
        if history:
            follow_up = resolve(question=question, history=tuple(history))
        filters = SearchFilters(folders=tuple(folders), types=tuple(types))
        with_model = serving.answerer is not None
        rewrite = needs_rewrite(follow_up=follow_up, with_model=with_model)
        # The documents the question may reach decide: a folder of German documents in
        # a mostly English collection answers German questions as asked.
        shares = self.store.language_shares(filters=filters)
        translate_to = None
        if with_model and not rewrite:
            # Asked in a language the collection is not written in: the model translates
            # it first, and the translation is searched too (a follow-up the model
            # rewrites is not: its rewrite is the search text).
            translate_to = translation_target(question=question, shares=shares)
        handle = serving.pipeline.submit(
            question=follow_up.query if follow_up is not None else question,
            priority=priority,
            k=max(1, min(k, 50)),
            max_new_tokens=max(1, max_new_tokens),
            filters=None if filters.empty else filters,
            conversation=follow_up,
            # With a model, the pipeline rewrites a follow-up before its retrieval.
            rewrite=rewrite,
            translate_to=translate_to,
            cancel=cancel,
        )
        settings = self.settings
        meta = self.store.meta  # the index's: its embedder embeds the question
        yield from answer_events(
            handle=handle,
            cancel=cancel,
            unfinished=self.ingestion.unfinished,
            embed=self.in_force.embed_sentences,  # [n] for an answer that cites nothing
            scale=self.in_force.sentence_scale(),
            # Why a quoted answer is quoted, as it stood when the question was asked.
            quoted_note=quoted_note(
                chosen=bool(settings.server_url or settings.model), error=self.models.error()
            ),
            refusal_note=across_note(
                question=question,
                documents=sorted(shares, key=lambda lang: -shares[lang]),
                embedder=meta.embedder_id if meta is not None else settings.embedder,
            ),
        )

    def serving(self) -> ServingPipeline:
        """The pipelines for the model in use now (built on first use)."""
        self.embedder()  # loaded (and the index made to match) before the first batch
        with self._serving_lock:
            serving = self._serving
            retiring = None
            ranker = self.settings.reranker
            if serving is not None and (
                serving.model is not self.models.current() or serving.ranker != ranker
            ):
                retiring, serving, self._serving = serving, None, None
                retiring.pipeline.hold()  # now: the hand-over thread may start late
            if serving is None:
                model = self.models.current()
                self._serving_profile = self.profiler.status()
                serving = ServingPipeline(
                    store=self.store,
                    embed=self.embed_in_force,
                    tagged=self.embed_tagged,
                    sentence_embed=self.in_force.embed_sentences,
                    sentence_scale=self.in_force.sentence_scale,
                    ordinary_word=either_ordinary(
                        words=self.word_languages, embedder=self.in_force.ordinary_word
                    ),
                    small_ordinary=small_collection_ordinary(
                        words=self.word_languages, embedder=self.in_force.ordinary_word
                    ),
                    model=model,
                    model_lock=self._answer_lock,
                    generation_fit=self._generation_fit() if model is not None else None,
                    reranker=self.reranker(),
                    ranker=ranker,
                )
                self._serving = serving
            elif serving.answerer is not None:
                status = self.profiler.status()
                if status != self._serving_profile:  # a profile may have been fitted since
                    self._serving_profile = status
                    serving.pipeline.set_generation_fit(self._generation_fit())
        if retiring is not None:
            retire(retiring, successor=serving)
        return serving

    def reranker(self) -> CandidateRanker | None:
        """The settings' cross-encoder (loaded once), the model in use for "model", or None."""
        model, setting = self.models.current(), self.settings.reranker
        return self.rankers.current(setting=setting, model=model, model_lock=self._answer_lock)

    def _drop_serving(self) -> None:
        """The model or the ranker changed: questions still waiting go on with the new
        pipelines (built now for them); idle pipelines are just closed."""
        with self._serving_lock:
            serving = self._serving
            if serving is None:
                return
            if serving.pipeline.idle():
                self._serving = None
                retire(serving, successor=None)
                return
        self.serving()  # sees the old pipelines' answerer is not the model's: hands over

    def _generation_fit(self) -> PowerLawFit | None:
        """T(B) from active profiling, when a profile of this model on this machine
        and collection is stored."""
        return stored_generation_fit(
            paths=self.paths, model_id=self.settings.model, chunks=self.store.counts()[1]
        )

    def planner_store(self) -> StoreSpec:
        """The index as the planner sees it (a `StoreSpec`): the collection's
        chunks, each as resident in the store's layout."""
        from engine.runtime.planner.report import store_spec

        _, chunks = self.store.counts()
        meta = self.store.meta
        return store_spec(
            chunks=chunks,
            vector_dim=meta.dimension if meta else DEFAULT_VECTOR_DIM,
            row_bytes=self.store.resident_row_bytes(),
        )

    def generate_stream(
        self,
        *,
        question: str,
        cancel: threading.Event | None = None,
        history: Sequence[Turn] = (),
        max_new_tokens: int = 256,
    ) -> Iterator[str]:
        """The chosen model's answer without retrieval (the API's `retrieval: false`).
        Raises ModelLoadError when no language model is in use."""
        model = self.models.current()
        if model is None:
            raise ModelLoadError("no language model is in use: answers need retrieval")
        # A model server runs its own batches: nothing here to keep from running twice.
        with (
            self._direct_answers.one(),
            contextlib.nullcontext() if model.remote else self._answer_lock,
        ):
            yield from model.answerer.stream(
                question=question.strip(),
                passages=[],
                cancel=cancel,
                history=history,
                max_new_tokens=max_new_tokens,
            )

    def language_model(self) -> GenerativeAnswerer | None:
        """The answerer of the language model in use; None in extractive mode."""
        model = self.models.current()
        return model.answerer if model is not None else None

    def last_generation(self) -> GenerationRecord | None:
        """What the model's last run fed and produced, if any."""
        model = self.models.current()
        return model.answerer.last_generation if model is not None else None

    def close(self, *, warm_up_wait_s: float = WARM_UP_WAIT_S) -> None:
        # The warm-up loads models in native code (torch, the first ONNX export) on a
        # daemon thread: left running, the interpreter's exit destroyed torch's threads
        # under it ("terminate called without an active exception", SIGABRT), and the
        # store closed under it ("warm-up failed"). Told by `_closing`, its loads stop
        # at their next step (`LoadStopped`): the wait is for the step in hand.
        self._closing.set()
        warming = self._warming
        if warming is not None and warming.is_alive():
            log.info("waiting for the warm-up to end before closing")
            warming.join(timeout=warm_up_wait_s)
            if warming.is_alive():
                log.warning("the warm-up did not end within %.0f s", warm_up_wait_s)
        with self._serving_lock:
            serving, self._serving = self._serving, None
        if serving is not None:
            serving.close()
        self.profiler.stop()
        self.watcher.close()
        self.ingest.stop()
        self.store.close()
