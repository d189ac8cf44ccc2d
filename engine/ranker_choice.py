"""Which ranker re-orders each question's candidates, from the settings' `reranker`.

- None: retrieval's own order (the default);
- "model": the language model in use (engine/answer/model_ranker.py), none in
  extractive mode;
- anything else: a cross-encoder from a local folder or the Hugging Face cache
  (engine/answer/reranker.py), loaded once and kept while the setting names it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from engine.answer.model_ranker import MODEL_RANKER, ModelRanker
from engine.answer.reranker import CandidateRanker, Reranker

if TYPE_CHECKING:
    from engine.answer.in_use import ModelInUse

_NONE = ("", "none", "off")


def setting_of(name: str | None) -> str | None:
    """The setting a person's choice means: None for "none"/"off"/"", "model" as it
    is, a local folder with its home expanded, a Hugging Face id as given."""
    name = (name or "").strip()
    if name.lower() in _NONE:
        return None
    if name.lower() == MODEL_RANKER:
        return MODEL_RANKER
    local = Path(name).expanduser()
    return str(local.resolve()) if local.exists() else name


class RankerChoice:
    """The cross-encoder is loaded once per name (about 90 MB, seconds on a CPU)."""

    def __init__(self) -> None:
        self._cross: Reranker | None = None
        self._lock = threading.Lock()

    def current(
        self, *, setting: str | None, model: ModelInUse | None, model_lock: threading.Lock
    ) -> CandidateRanker | None:
        if setting == MODEL_RANKER:  # sharing the lock of the engine's other model runs
            return None if model is None else ModelRanker(answerer=model.answerer, lock=model_lock)
        if not setting:
            return None
        return self.cross_encoder(setting)

    def cross_encoder(self, name: str) -> Reranker:
        """The cross-encoder `name`, loaded now unless it is the one kept. Raises
        ModelLoadError (a name that does not load is never kept)."""
        with self._lock:
            if self._cross is None or self._cross.info.id != name:
                self._cross = Reranker(model=name)
            return self._cross
