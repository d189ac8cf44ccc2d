"""Download a model from the Hugging Face hub, only when a person asks for it.

Why not `huggingface_hub.hf_hub_download`: the pinned version (2.4) writes each try
to a fresh process-unique temporary file, so an interrupted download starts over,
and it has no way to stop a file half-way. This module speaks the hub's public
HTTP layout itself (the same URLs `hf_hub_download` uses):

    GET {endpoint}/api/models/{repo_id}?blobs=true   → {"sha", "siblings": [{"rfilename", "size"}]}
    GET {endpoint}/{repo_id}/resolve/{sha}/{file}    (Range: bytes=N- to resume)

`endpoint` is HF_ENDPOINT (tests point it at a loopback fake hub). Files go to a
plain model folder under the data folder (`catalogue.download_folder`), each first
as `<file>.part`; a later download of the same repo resumes every `.part` from its
length. Cancelling sets a flag the copy loop checks between chunks, so the `.part`
stays for the next try. Only safetensors weights, configs and tokenizer files are
fetched: other weight formats can run code when opened, and RAGDoll never loads them.
A download may instead name one `.gguf` file of a repo (a Recommended model's GGUF
variant): only that file is fetched, into the same kind of folder; GGUF is plain data
that RAGDoll's own reader parses.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from engine.runtime.planner.sizes import format_gib
from engine.wire import ModelDownload

COMPLETE_MARKER = ".ragdoll-download-complete"
DEFAULT_ENDPOINT = "https://huggingface.co"
CHUNK_BYTES = 1 << 20
WANTED = ("*.safetensors", "*.safetensors.index.json", "*.json", "tokenizer.model", "*.txt")
_TIMEOUT = httpx.Timeout(30.0, connect=10.0)


class DownloadCancelled(Exception):
    pass


@dataclass(frozen=True, kw_only=True)
class RemoteFile:
    name: str
    size: int | None


def hub_endpoint() -> str:
    # Read at call time: huggingface_hub.constants freezes the environment at import.
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hub_token() -> str | None:
    """The person's own hub token, for gated models they have accepted."""
    try:
        from huggingface_hub import get_token

        return get_token()
    except Exception:
        return None


def wanted(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(base, pattern) for pattern in WANTED)


def list_files(
    *, client: httpx.Client, endpoint: str, repo_id: str, only: str | None = None
) -> tuple[str, list[RemoteFile]]:
    """(commit sha, the files worth fetching) of the repo's main revision; `only`: just
    that .gguf file."""
    response = client.get(f"{endpoint}/api/models/{repo_id}", params={"blobs": "true"})
    _raise_for_hub(response, repo_id=repo_id)
    info = response.json()
    sha = str(info.get("sha") or "main")
    if only is not None:
        if not only.lower().endswith(".gguf") or "/" in only:
            raise ValueError(f"{only} is not a GGUF file name")
        named = [
            RemoteFile(name=s["rfilename"], size=s.get("size"))
            for s in info.get("siblings", [])
            if s["rfilename"] == only
        ]
        if not named:
            raise ValueError(f"{repo_id} has no file {only}")
        return sha, named
    files = [
        RemoteFile(name=s["rfilename"], size=s.get("size"))
        for s in info.get("siblings", [])
        if wanted(s["rfilename"])
    ]
    files = without_duplicate_weights(files)
    if not any(f.name == "config.json" for f in files):
        raise ValueError(f"{repo_id} has no config.json: it is not a model RAGDoll can load")
    if not any(f.name.endswith(".safetensors") for f in files):
        raise ValueError(f"{repo_id} has no .safetensors weights; RAGDoll loads only those")
    return sha, files


def without_duplicate_weights(files: list[RemoteFile]) -> list[RemoteFile]:
    """Mistral's repos hold the weights twice: `consolidated.safetensors` for their
    own runtime beside the sharded `model-*.safetensors` transformers loads. Fetch
    the second only (14.5 GB, not 29); a repo with only consolidated files keeps them."""

    def consolidated(f: RemoteFile) -> bool:
        base = f.name.rsplit("/", 1)[-1]
        return base.startswith("consolidated") and base.endswith(".safetensors")

    if any(f.name.endswith(".safetensors") and not consolidated(f) for f in files):
        return [f for f in files if not consolidated(f)]
    return files


class DownloadJob:
    """One repo's download, run in its own thread; `snapshot()` is safe from any thread."""

    def __init__(
        self,
        *,
        repo_id: str,
        folder: Path,
        file: str | None = None,
        endpoint: str | None = None,
        token: str | None = None,
        on_change: Callable[[ModelDownload], None] | None = None,
    ) -> None:
        self.repo_id = repo_id
        self.folder = folder
        self.file = file
        self._endpoint = endpoint or hub_endpoint()
        self._token = token
        self._on_change = on_change
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._state = ModelDownload(
            download_id=uuid.uuid4().hex[:12],
            repo_id=repo_id,
            state="queued",
            folder=str(folder),
            file=file,
        )
        self._thread: threading.Thread | None = None

    @property
    def download_id(self) -> str:
        return self._state.download_id

    def snapshot(self) -> ModelDownload:
        with self._lock:
            return self._state

    def start(self) -> DownloadJob:
        self._thread = threading.Thread(target=self.run, name="ragdoll-download", daemon=True)
        self._thread.start()
        return self

    def cancel(self) -> ModelDownload:
        self._cancel.set()
        return self.snapshot()

    def wait(self, *, timeout_s: float | None = None) -> ModelDownload:
        if self._thread is not None:
            self._thread.join(timeout_s)
        return self.snapshot()

    def wait_change(self, *, after: ModelDownload, timeout_s: float) -> ModelDownload:
        """The state once it differs from `after` (or after `timeout_s`)."""
        with self._changed:
            self._changed.wait_for(lambda: self._state != after, timeout=timeout_s)
            return self._state

    def run(self) -> None:
        self._update(state="running")
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        try:
            with httpx.Client(headers=headers, timeout=_TIMEOUT, follow_redirects=True) as client:
                self._download(client)
        except DownloadCancelled:
            self._update(state="cancelled", current_file=None)
        except Exception as e:  # reported to the person; the .part files stay
            self._update(state="failed", error=hub_failure(e))
        else:
            if self.file is None:  # a GGUF file is whole once renamed from its .part
                (self.folder / COMPLETE_MARKER).write_text(self.repo_id + "\n", encoding="utf-8")
            self._update(state="done", current_file=None)

    def _download(self, client: httpx.Client) -> None:
        sha, files = list_files(
            client=client, endpoint=self._endpoint, repo_id=self.repo_id, only=self.file
        )
        self.folder.mkdir(parents=True, exist_ok=True)
        sizes = [f.size for f in files]
        total = sum(s for s in sizes if s is not None) if None not in sizes else None
        self._update(files_total=len(files), bytes_total=total)
        if total is not None:
            _check_room(folder=self.folder, needed=total - _bytes_on_disk(self.folder, files))
        for f in files:
            if self._cancel.is_set():
                raise DownloadCancelled
            self._fetch(client=client, sha=sha, remote=f)
            self._update(files_done=self.snapshot().files_done + 1)

    def _fetch(self, *, client: httpx.Client, sha: str, remote: RemoteFile) -> None:
        target = self.folder / remote.name
        if not target.resolve().is_relative_to(self.folder.resolve()):
            raise ValueError(f"the hub named a file outside the model folder: {remote.name}")
        if target.is_file() and (remote.size is None or target.stat().st_size == remote.size):
            self._add_bytes(target.stat().st_size, resumed=True, name=remote.name)
            return
        part = target.with_name(target.name + ".part")
        part.parent.mkdir(parents=True, exist_ok=True)
        have = part.stat().st_size if part.is_file() else 0
        if remote.size is not None and have > remote.size:
            part.unlink()  # a different file was there before: start again
            have = 0
        url = f"{self._endpoint}/{self.repo_id}/resolve/{sha}/{remote.name}"
        headers = {"Range": f"bytes={have}-"} if have else {}
        with client.stream("GET", url, headers=headers) as response:
            if have and response.status_code == 200:
                have = 0  # the server ignored the Range: take the whole file
            elif response.status_code == 416 and remote.size == have:
                pass  # the .part is already whole
            else:
                _raise_for_hub(response, repo_id=self.repo_id)
            self._add_bytes(have, resumed=True, name=remote.name)
            if response.status_code != 416:
                with part.open("ab" if have else "wb") as out:
                    for chunk in response.iter_bytes(CHUNK_BYTES):
                        out.write(chunk)
                        self._add_bytes(len(chunk), resumed=False, name=remote.name)
                        if self._cancel.is_set():
                            raise DownloadCancelled
        if remote.size is not None and part.stat().st_size != remote.size:
            raise OSError(
                f"{remote.name}: got {part.stat().st_size} bytes of {remote.size}; "
                "download again to resume"
            )
        part.replace(target)

    def _add_bytes(self, n: int, *, resumed: bool, name: str) -> None:
        with self._lock:
            s = self._state
            self._state = replace(
                s,
                bytes_done=s.bytes_done + n,
                bytes_resumed=s.bytes_resumed + (n if resumed else 0),
                current_file=name,
            )
            self._changed.notify_all()
        if self._on_change is not None:
            self._on_change(self._state)

    def _update(self, **changes: object) -> None:
        with self._lock:
            self._state = replace(self._state, **changes)  # type: ignore[arg-type]
            self._changed.notify_all()
            state = self._state
        if self._on_change is not None:
            self._on_change(state)


NO_CONNECTION = "No connection to the Hugging Face hub"
_AGAIN = "Download again once it is back: it resumes where it stopped."


def hub_failure(error: Exception) -> str:
    """Why a download failed, for a person: a network that is down or breaks off
    in words (httpx says "[Errno -2] Name or service not known"), anything else
    as it was raised."""
    if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.ProxyError):
        return f"{NO_CONNECTION} (huggingface.co could not be reached). {_AGAIN}"
    if isinstance(error, httpx.TimeoutException):
        return f"The Hugging Face hub stopped answering. {_AGAIN}"
    if isinstance(error, httpx.TransportError):
        return f"The connection to the Hugging Face hub broke off. {_AGAIN}"
    return str(error) or type(error).__name__


def _bytes_on_disk(folder: Path, files: list[RemoteFile]) -> int:
    have = 0
    for f in files:
        for path in (folder / f.name, folder / (f.name + ".part")):
            if path.is_file():
                have += path.stat().st_size
    return have


def _check_room(*, folder: Path, needed: int) -> None:
    """Refuse before fetching rather than fill the disk half-way."""
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise OSError(
            f"not enough disk space in {folder}: the download needs {format_gib(needed)} "
            f"more, {format_gib(free)} is free"
        )


def _raise_for_hub(response: httpx.Response, *, repo_id: str) -> None:
    if response.status_code < 400:
        return
    if response.status_code in (401, 403):
        raise PermissionError(
            f"the hub refused {repo_id} ({response.status_code}): a gated model needs its "
            "licence accepted on huggingface.co and a token from `huggingface-cli login`"
        )
    if response.status_code == 404:
        raise FileNotFoundError(f"the hub has no {repo_id} (or not this file): {response.url}")
    raise OSError(f"the hub answered {response.status_code} for {response.url}")


class Downloads:
    """The engine's downloads: one job per repo at a time."""

    def __init__(self, *, folder_of: Callable[[str], Path]) -> None:
        self._folder_of = folder_of
        self._lock = threading.Lock()
        self._jobs: dict[str, DownloadJob] = {}

    def start(self, *, repo_id: str, file: str | None = None) -> ModelDownload:
        with self._lock:
            for job in self._jobs.values():
                same = job.repo_id == repo_id and job.file == file
                if same and job.snapshot().state in ("queued", "running"):
                    return job.snapshot()
            job = DownloadJob(
                repo_id=repo_id, folder=self._folder_of(repo_id), file=file, token=hub_token()
            )
            self._jobs[job.download_id] = job
        return job.start().snapshot()

    def get(self, download_id: str) -> DownloadJob | None:
        with self._lock:
            return self._jobs.get(download_id)

    def all(self) -> list[ModelDownload]:
        with self._lock:
            return [j.snapshot() for j in self._jobs.values()]
