"""Re-run the reliability and security probe of issue #45 against real engines, each
on a home of its own, and print what each scenario measured (docs/hardening.md holds
a run's figures). Linux; the full-disk scenario needs unshare and nsenter.

    python tools/hardening_probe.py [--only token,swap,...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAGDOLL_AUTO_PROFILE", "0")

from engine.paths import resolve_paths  # noqa: E402
from engine.rag.ingest.fspath import from_store  # noqa: E402
from engine.service.client import EngineClient  # noqa: E402
from tests.support.engine import process_alive, running_engine  # noqa: E402

SECRET = "The vault combination is 31-41-59."
Result = dict[str, object]


def _wait(ready: Callable[[], bool], *, timeout_s: float = 300, every_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError("the probe waited too long")
        time.sleep(every_s)


def _idle(client: EngineClient) -> None:
    _wait(lambda: not client.ingest_queue().jobs, every_s=0.3)


def _files(folder: Path, count: int, *, words: int = 60, seed: int = 1) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)]
    out = []
    for i in range(count):
        path = folder / f"note {i:03d}.txt"
        path.write_text(f"Note {i}. " + " ".join(rng.choice(vocab) for _ in range(words)))
        out.append(path)
    return out


def _served_secret(client: EngineClient) -> list[str]:
    hits = client.search(query="vault combination", k=20).hits
    found = [f"search: {h.path}" for h in hits if "31-41-59" in h.text]
    for h in hits:
        try:
            if "31-41-59" in client.source(chunk_id=h.chunk_id).page_text:
                found.append(f"source: {h.chunk_id}")
        except Exception:
            pass
    answer = client.ask(question="What is the vault combination?")
    return found + [f"ask: {c.path}" for c in answer.citations if "31-41-59" in c.text]


# -- 1. the token and a dead engine's port --------------------------------------------


def probe_token(work: Path) -> Result:
    os.environ["RAGDOLL_HOME"] = str(work / "home")
    paths = resolve_paths()
    first = EngineClient.connect(paths=paths, start=True, wait_s=180)
    pid, old = first.status().pid, first.endpoint.token
    port = urlsplit(first.endpoint.base_url).port or 0
    first.close()
    os.kill(pid, signal.SIGKILL)
    _wait(lambda: not process_alive(pid))
    from tests.engine.test_engine_identity import _bind

    recorder = _bind(port)  # answers 200 to all, with a made-up proof; keeps what it got
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    try:
        second = EngineClient.connect(paths=paths, start=True, wait_s=180)
        import httpx

        with httpx.Client(base_url=second.endpoint.base_url, trust_env=False) as http:
            stale = http.get("/v1/status", headers={"Authorization": f"Bearer {old}"})
        result: Result = {
            "requests to the listener": len(recorder.seen),
            "of them with a token": sum(
                any(k.lower() == "authorization" for k in h) for h in recorder.seen
            ),
            "new engine started": second.status().pid != pid,
            "token changed": second.endpoint.token != old,
            "old token on the new engine": stale.status_code,
        }
        pid2 = second.status().pid
        second.shutdown()
        second.close()
        _wait(lambda: not process_alive(pid2))  # before its home is removed
        return result
    finally:
        recorder.shutdown()
        recorder.server_close()


# -- 2. a folder swapped for a link mid-job ----------------------------------------------


def probe_swap(work: Path) -> Result:
    outside = work / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    docs = work / "docs"
    _files(docs / "many", 60)
    (docs / "zdir").mkdir()
    (docs / "zdir" / "secret.txt").write_text("The shed key hangs by the door.\n")
    with running_engine(home=work / "home") as engine:
        client = engine.client
        job = client.add_folder(path=docs).job
        assert job is not None
        _wait(lambda: client.ingest_progress(job_id=job.job_id).files_total > 0, every_s=0.01)
        client.pause_ingest()
        _wait(lambda: client.ingest_progress(job_id=job.job_id).current is None)
        at = client.ingest_progress(job_id=job.job_id).files_done
        os.rename(docs / "zdir", work / "zdir-moved")
        os.symlink(outside, docs / "zdir")
        client.resume_ingest()
        _idle(client)
        time.sleep(2)  # the watcher's job for the swap
        _idle(client)
        errors = {
            Path(e.path).relative_to(docs).as_posix(): e.reason
            for e in client.ingest_progress(job_id=job.job_id).errors
        }
        return {
            "paused after files": at,
            "job errors": errors,
            "secret served": _served_secret(client),
        }


# -- 3. a folder removed mid-ingest ---------------------------------------------------


def probe_removal(work: Path) -> Result:
    folder = work / "marsh"
    _files(folder, 100)
    os.environ["RAGDOLL_INGEST_COMMIT_FILES"] = "10"
    try:
        with running_engine(home=work / "home") as engine:
            client = engine.client
            job = client.add_folder(path=folder).job
            assert job is not None
            _wait(lambda: client.ingest_progress(job_id=job.job_id).files_done >= 63, every_s=0.01)
            at = client.ingest_progress(job_id=job.job_id).files_done
            client.remove_folder(path=folder)
            left_at_once = len(client.documents())
            _idle(client)
            return {
                "removed at files done": at,
                "documents left at once": left_at_once,
                "job state": client.ingest_progress(job_id=job.job_id).state,
                "documents left after the job": len(client.documents()),
                "chunks left": client.status().chunks,
            }
    finally:
        os.environ.pop("RAGDOLL_INGEST_COMMIT_FILES", None)


# -- 4. a full disk, twice ------------------------------------------------------------


def probe_full_disk(work: Path) -> Result:
    from tests.engine.test_disk_full import _consistent, _engine, _leave_free
    from tests.support.small_disk import small_disk

    os.environ["RAGDOLL_HOME"] = str(work / "home")
    paths = resolve_paths().ensure()
    docs = work / "docs"
    texts = _files(docs, 200, words=1500)
    for i, path in enumerate(texts):
        if i % 5 == 4:  # a copy of an earlier file: its rows are copied, not embedded
            shutil.copy(texts[i - 3], path)
    out: Result = {}
    with small_disk(mount=paths.data, size_mb=16) as disk:
        ballast = disk.inside(paths.data / "ballast")
        ballast.write_bytes(b"")
        with _engine(disk, paths) as client:
            _leave_free(disk, ballast=ballast, free=3_000_000)
            for attempt in (1, 2):
                job = (
                    client.add_folder(path=docs).job
                    if attempt == 1
                    else client.ingest(paths=[docs])
                )
                assert job is not None
                last = job
                for last in client.ingest_events(job_id=job.job_id):  # noqa: B007
                    pass
                out[f"run {attempt}"] = {
                    "state": last.state,
                    "files in": last.disk_full.files_in if last.disk_full else None,
                    "not read": last.disk_full.files_not_read if last.disk_full else None,
                    "index problems": _consistent(client),
                }
                os.truncate(ballast, max(0, ballast.stat().st_size - 512 * 1024))  # a little room
        ballast.unlink()
        with _engine(disk, paths) as client:
            _wait(
                lambda: client.status().documents >= len(texts) or False, timeout_s=600, every_s=1
            )
            _idle(client)
            out["after a restart with room"] = {
                "documents": client.status().documents,
                "of files": len(texts),
                "errors": len(client.errors()),
                "index problems": _consistent(client),
            }
    return out


# -- 5. names that are not UTF-8 --------------------------------------------------------


def probe_names(work: Path) -> Result:
    docs = work / "docs"
    docs.mkdir()
    byte_name = os.fsencode(docs) + b"/lamp\xe9.txt"
    with open(byte_name, "w") as f:
        f.write("The brass lamp in the hall takes a candle bulb.\n")
    (docs / "lamp\uefe9.txt").write_text("The paper lantern on the porch is folded in winter.\n")
    with running_engine(home=work / "home") as engine:
        first = engine.ingest(docs)
        again = engine.ingest(docs)
        listed = [d.path for d in engine.client.documents()]
        os.unlink(byte_name)
        engine.ingest(docs)
        hits = engine.client.search(query="brass lamp candle bulb", k=5).hits
        return {
            "documents": len(listed),
            "distinct files behind them": len({os.fsencode(from_store(p)) for p in listed}),
            "first ingest (indexed, skipped)": (first.files_indexed, first.files_skipped),
            "rescan (indexed, skipped)": (again.files_indexed, again.files_skipped),
            "deleted file's text still found": any("brass" in h.text for h in hits),
        }


# -- 6. bad files ---------------------------------------------------------------------------


def probe_bad_files(work: Path) -> Result:
    from tests.engine.test_bad_inputs import _bad_folder, _hostile_folder

    folder = _bad_folder(work)
    hostile, _ = _hostile_folder(work)
    os.mkfifo(folder / "pipe.txt")
    os.symlink(work / "nowhere.txt", folder / "broken link.txt")
    os.symlink(work, folder / "folder out")
    (folder / "ole2.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600)
    settings = resolve_paths(env={"RAGDOLL_HOME": str(work / "home")}).ensure().settings_file
    settings.write_text(json.dumps({"max_file_mb": 2}))
    with running_engine(home=work / "home") as engine:
        one = engine.ingest(folder)
        two = engine.ingest(hostile)
        reasons = {Path(e.path).name: e.reason for e in [*one.errors, *two.errors]}
        return {
            "kinds listed": len(reasons),
            "reasons": reasons,
            "in /v1/documents/errors": len(engine.client.errors()),
            "engine still answers": engine.client.status().pid == engine.pid,
        }


# -- 7. kill -9 mid-ingest ----------------------------------------------------------------


def probe_kills(work: Path) -> Result:
    folder = work / "archive"
    texts = _files(folder, 300, words=30)
    home = work / "home"
    os.environ["RAGDOLL_INGEST_COMMIT_FILES"] = "25"
    out: Result = {}
    try:
        first = True
        for threshold in (37, 202, 259):
            with running_engine(home=home) as engine:
                if first:
                    engine.client.add_paths(paths=[folder])
                    first = False
                _wait(lambda e=engine, t=threshold: e.client.status().documents >= t, every_s=0.01)
                out[f"killed at {threshold}"] = engine.client.status().documents
                os.kill(engine.pid, signal.SIGKILL)
                _wait(lambda e=engine: not process_alive(e.pid))
        with running_engine(home=home) as engine:
            _idle(engine.client)
            docs = engine.client.documents()
            counts = Counter(d.path for d in docs)
            out["after the last start"] = {
                "documents": len(docs),
                "of files": len(texts),
                "paths twice": sum(1 for c in counts.values() if c > 1),
                "chunks": engine.client.status().chunks,
                "rows' chunks": sum(d.chunks for d in docs),
            }
    finally:
        os.environ.pop("RAGDOLL_INGEST_COMMIT_FILES", None)
    return out


# -- 8. concurrent answers and searches ----------------------------------------------------


def probe_concurrency(work: Path) -> Result:
    folder = work / "notes"
    _files(folder, 40)
    with running_engine(home=work / "home") as engine:
        engine.ingest(folder)
        outcomes: list[str] = []
        lock = threading.Lock()

        def ask(i: int) -> None:
            client = EngineClient(endpoint=engine.client.endpoint)
            try:
                kind = "ask" if i % 2 else "search"
                if kind == "ask":
                    answer = client.ask(question=f"What does note {i} say?")
                    ok = bool(answer.answer)
                else:
                    ok = bool(client.search(query=f"note {i}", k=5).hits)
                with lock:
                    outcomes.append(f"{kind} {'ok' if ok else 'empty'}")
            except Exception as e:
                with lock:
                    outcomes.append(f"error {type(e).__name__}")
            finally:
                client.close()

        started = time.monotonic()
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(60)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {
            "requests": len(threads),
            "outcomes": dict(Counter(outcomes)),
            "wall s": round(time.monotonic() - started, 1),
            "engine still answers": engine.client.status().pid == engine.pid,
        }


PROBES: dict[str, Callable[[Path], Result]] = {
    "token": probe_token,
    "swap": probe_swap,
    "removal": probe_removal,
    "full_disk": probe_full_disk,
    "names": probe_names,
    "bad_files": probe_bad_files,
    "kills": probe_kills,
    "concurrency": probe_concurrency,
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tools/hardening_probe.py")
    parser.add_argument("--only", default=",".join(PROBES))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    results: dict[str, object] = {}
    for name in args.only.split(","):
        with tempfile.TemporaryDirectory(prefix=f"probe-{name}-") as tmp:
            started = time.monotonic()
            try:
                results[name] = PROBES[name](Path(tmp))
            except Exception as e:
                results[name] = {"failed": f"{type(e).__name__}: {e}"}
            finally:
                os.environ.pop("RAGDOLL_HOME", None)
            print(f"{name} ({time.monotonic() - started:.0f} s):", flush=True)
            print(json.dumps(results[name], indent=2, default=str), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
