"""Exceptions that cross module boundaries. Each subclasses a builtin so that
callers who do not know RAGDoll can still catch it sensibly."""

from __future__ import annotations

import errno


class RagdollError(Exception):
    """Base of every RAGDoll error."""


class ParseError(RagdollError, ValueError):
    """A document could not be read; `reason` is shown to the person."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ModelLoadError(RagdollError, RuntimeError):
    """A language model could not be found or loaded."""


class EmbedderError(RagdollError, RuntimeError):
    """The embedder could not be loaded."""


class LoadStopped(EmbedderError):
    """A load given up between its steps because the engine is closing."""


class StaleVectorsError(RagdollError, RuntimeError):
    """Question vectors made by an embedder the index no longer uses (it was
    swapped between the embedding and the search): embed them again."""


class EngineUnavailableError(RagdollError, ConnectionError):
    """The engine process is not running and could not be started."""


class EngineRequestError(RagdollError, RuntimeError):
    """The engine answered a request with an error."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class UnsupportedArchitectureError(RagdollError, ValueError):
    """A model's config names an architecture the planner does not know."""


class PlacementError(RagdollError, ValueError):
    """Nothing fits: the message says how much memory is missing."""


class DiskFullError(RagdollError, OSError):
    """A write to the index found its disk full. `folder` is the index folder,
    `mount` the disk (mount point) that holds it."""

    def __init__(self, *, folder: str, mount: str, free_bytes: int | None) -> None:
        super().__init__(f"the disk at {mount} (holding {folder}) is full")
        self.folder = folder
        self.mount = mount
        self.free_bytes = free_bytes


class LinkedPathError(RagdollError, OSError):
    """A listed file's path holds a symbolic link now (a folder swapped for a link
    after the listing): the file is not opened. `link` is the component found."""

    def __init__(self, *, path: str, link: str) -> None:
        super().__init__(errno.ELOOP, f"a symbolic link ({link}) on the way to {path}")
        self.path = path
        self.link = link
