"""The engine's environment variables, read once, and environment values set for a block.

`EngineEnviron.from_environ()` reads every `RAGDOLL_*` variable the engine process
honours into one frozen value: the engine's start (engine/service/server.py `serve`,
or an in-process `Engine` in tests and tools) reads it once and hands each part the
field it needs, so no module below asks `os.environ` for these itself. Each field's
default is the variable's when it is unset; docs/settings.md lists every setting of
RAGDoll (these, `EngineSettings`, `server.json`, `folders.json`, the window's).

RAGDOLL_HOME (`home`) too: `engine.paths.resolve_paths` reads it here, where the window,
the command line and the engine's `main` find the app's folders, and hands down the
`Paths` it names; nothing below them reads it again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "RAGDOLL_HOME"
AUTO_PROFILE_ENV = "RAGDOLL_AUTO_PROFILE"
OFFLINE_ENV = "RAGDOLL_OFFLINE"
HUB_OFFLINE_ENV = "HF_HUB_OFFLINE"
INGEST_NICE_ENV = "RAGDOLL_INGEST_NICE"
COMMIT_FILES_ENV = "RAGDOLL_INGEST_COMMIT_FILES"
REEMBED_BATCH_ENV = "RAGDOLL_REEMBED_BATCH"
EMBEDDER_BACKEND_ENV = "RAGDOLL_EMBEDDER_BACKEND"
EMBEDDER_CACHE_ENV = "RAGDOLL_EMBEDDER_CACHE"
EMBEDDER_INT8_ENV = "RAGDOLL_EMBEDDER_INT8"
WORDS_CACHE_ENV = "RAGDOLL_WORDS_CACHE"
IVF_SCORER_ENV = "RAGDOLL_IVF_SCORER"
TORCH_KERNELS_ENV = "RAGDOLL_TORCH_KERNELS"

# Ingestion's thread (and the parsing child) run this much nicer than questions.
BACKGROUND_NICE = 10
# Chunks per store batch of a re-embedding: each is one commit to the new table and
# the most a kill -9 can lose.
REEMBED_BATCH = 256
IVF_SCORERS = ("auto", "float32", "int8")
_TRUE = {"1", "true", "yes", "on"}
_OFF = ("0", "false", "no", "off")


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


@dataclass(frozen=True, kw_only=True)
class EngineEnviron:
    """What the engine's environment variables ask for, each field its variable's
    meaning with the default it has when unset."""

    # RAGDOLL_HOME: every folder of the app under this one (None: the platform's).
    home: Path | None = None

    # RAGDOLL_AUTO_PROFILE ("0": an idle engine does not profile itself).
    auto_profile: bool = True
    # RAGDOLL_OFFLINE when set, else HF_HUB_OFFLINE: the person asked for no downloads
    # (engine/service/offline.py: the engine's start sets RAGDOLL_OFFLINE).
    downloads_refused: bool = False
    # RAGDOLL_INGEST_NICE (0..19): how much nicer ingestion's thread runs than questions.
    ingest_nice: int = BACKGROUND_NICE
    # RAGDOLL_INGEST_COMMIT_FILES: files per committed group (None: CommitPolicy's).
    ingest_commit_files: int | None = None
    # RAGDOLL_REEMBED_BATCH: chunks per store batch of a re-embedding.
    reembed_batch: int = REEMBED_BATCH
    # RAGDOLL_EMBEDDER_BACKEND=torch|onnx|bf16|openvino|int8 (None: the engine's "auto").
    embedder_backend: str | None = None
    # RAGDOLL_EMBEDDER_CACHE: where embedder exports go instead of the engine's cache.
    embedder_cache: Path | None = None
    # RAGDOLL_EMBEDDER_INT8 ("0"/"false"/"no"/"off": ingestion stays on the float path).
    embedder_int8: bool = True
    # RAGDOLL_WORDS_CACHE: where the table of languages' own words is kept instead of the
    # engine's cache (engine/rag/answer/word_languages.py; tests share one).
    words_cache: Path | None = None
    # RAGDOLL_IVF_SCORER=auto|float32|int8: how the IVF view scores a partition.
    ivf_scorer: str = "auto"
    # RAGDOLL_TORCH_KERNELS=1: the torch forms instead of the native GGML kernels.
    torch_kernels: bool = False

    @classmethod
    def from_environ(cls, env: Mapping[str, str] | None = None) -> EngineEnviron:
        """The values `env` (default: this process's environment) asks for."""
        env = os.environ if env is None else env
        cache = env.get(EMBEDDER_CACHE_ENV)
        words = env.get(WORDS_CACHE_ENV)
        home = env.get(HOME_ENV)
        return cls(
            home=Path(home) if home else None,
            auto_profile=env.get(AUTO_PROFILE_ENV, "1") != "0",
            downloads_refused=downloads_refused(env),
            ingest_nice=_nice(env.get(INGEST_NICE_ENV, "")),
            ingest_commit_files=_count(env.get(COMMIT_FILES_ENV, "")),
            reembed_batch=_count(env.get(REEMBED_BATCH_ENV, "")) or REEMBED_BATCH,
            embedder_backend=env.get(EMBEDDER_BACKEND_ENV) or None,
            embedder_cache=Path(cache) if cache else None,
            embedder_int8=env.get(EMBEDDER_INT8_ENV, "1").strip() not in _OFF,
            words_cache=Path(words) if words else None,
            ivf_scorer=env.get(IVF_SCORER_ENV, "auto").strip().lower(),
            torch_kernels=torch_kernels_forced(env),
        )


def torch_kernels_forced(env: Mapping[str, str] | None = None) -> bool:
    """RAGDOLL_TORCH_KERNELS. The one variable read where it is used (the runtime's
    kernel choice, engine/runtime/executor/ggml_native.py): models are assembled by
    tools and tests outside any engine, and there is no engine value to hand down."""
    env = os.environ if env is None else env
    return env.get(TORCH_KERNELS_ENV, "").strip().lower() in {"1", "true", "yes"}


def downloads_refused(env: Mapping[str, str]) -> bool:
    """RAGDOLL_OFFLINE when it is set, else HF_HUB_OFFLINE as the person set it."""
    if OFFLINE_ENV in env:
        return truthy(env[OFFLINE_ENV])
    return truthy(env.get(HUB_OFFLINE_ENV))


def _nice(value: str) -> int:
    try:
        return max(0, min(19, int(value))) if value else BACKGROUND_NICE
    except ValueError:
        return BACKGROUND_NICE


def _count(value: str) -> int | None:
    return max(1, int(value)) if value.isdigit() else None


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """`values` set in os.environ inside the block; each name afterwards holds its
    earlier value again, or is absent if it was absent."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
