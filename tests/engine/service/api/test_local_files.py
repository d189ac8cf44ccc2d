"""The engine and the files on this machine, through the real engine process: file
names that are not UTF-8 leave the engine in the store's encoding (never a 500, never
a lost log line), and what the app writes only this user can read."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import httpx
import pytest

from engine.paths import resolve_paths
from engine.rag.ingest.fspath import from_store, to_store
from tests.support.engine import running_engine

# "café" in Latin-1: the é is one byte, 0xE9, which is not UTF-8.
LATIN1 = b"caf\xe9"


def _modes(home: Path) -> list[str]:
    """What under `home` another account could read or enter."""
    open_to_others = []
    for root, dirnames, filenames in os.walk(home):
        for name in dirnames:
            mode = stat.S_IMODE(os.lstat(Path(root) / name).st_mode)
            if mode != 0o700:
                open_to_others.append(f"{Path(root) / name}: {oct(mode)}")
        for name in filenames:
            path = Path(root) / name
            mode = os.lstat(path)
            if stat.S_ISREG(mode.st_mode) and stat.S_IMODE(mode.st_mode) != 0o600:
                open_to_others.append(f"{path}: {oct(stat.S_IMODE(mode.st_mode))}")
    return open_to_others


@pytest.mark.skipif(os.name != "posix", reason="file modes and byte names are POSIX")
def test_names_that_are_not_utf8_and_private_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # An install from before the rule: folders 0755, files 0644.
    old = resolve_paths(env={"RAGDOLL_HOME": str(home)})
    for folder in (old.data, old.config, old.logs, old.data / "conversations"):
        folder.mkdir(parents=True, mode=0o755)
        os.chmod(folder, 0o755)
    os.chmod(home, 0o777)  # RAGDOLL_HOME itself, made open to all
    (old.data / "conversations" / "c1.json").write_text("{}")
    os.chmod(old.data / "conversations" / "c1.json", 0o644)

    docs = tmp_path / os.fsdecode(LATIN1 + b" docs")  # the folder's own name too
    docs.mkdir()
    folder = os.fsencode(docs)
    # A long document, so that it stays the job's current file for a while.
    text = "".join(
        f"Paragraph {i}: the orchard's pears ripen in September.\n\n" for i in range(300)
    )
    with open(folder + b"/" + LATIN1 + b".txt", "w", encoding="utf-8") as f:
        f.write(text)
    with open(folder + b"/" + LATIN1 + b"-broken.pdf", "wb") as f:
        f.write(b"%PDF-1.4 this is not a PDF")
    name = to_store(os.fsdecode(LATIN1))  # "caf\uefe9"

    with running_engine(home=home) as engine:
        statuses: list[int] = []
        stop = threading.Event()

        def poll() -> None:
            endpoint = engine.client.endpoint
            headers = {"Authorization": f"Bearer {endpoint.token}"}
            with httpx.Client(base_url=endpoint.base_url, headers=headers) as http:
                while not stop.is_set():
                    for path in ("/v1/ingest/queue", "/v1/queue"):
                        statuses.append(http.get(path).status_code)

        poller = threading.Thread(target=poll)
        poller.start()
        try:
            progress = engine.ingest(docs)
        finally:
            stop.set()
            poller.join()
        assert statuses and set(statuses) == {200}
        assert progress.state == "done"
        assert [Path(e.path).name for e in progress.errors] == [f"{name}-broken.pdf"]
        again = engine.client.ingest_progress(job_id=progress.job_id)
        assert again.errors == progress.errors
        assert f"{name}.txt" in {Path(d.path).name for d in engine.client.documents()}
        hits = engine.client.search(query="when do the pears ripen", k=3).hits
        assert hits and Path(hits[0].path).name == f"{name}.txt"
        # The folder, as the API shows it and as the CLI names it.
        (folder,) = engine.client.folders()
        assert folder.path == to_store(str(docs))
        assert engine.client.collections()[0].folders == [folder.path]
        again = engine.ragdoll("ingest", str(docs))
        assert again.returncode == 2, again.stderr  # done; the broken PDF is listed
        assert f"{name}-broken.pdf" in again.stdout and "1 unchanged" in again.stdout
        result = engine.ragdoll("ask", "When do the orchard's pears ripen?")
        assert result.returncode == 0, result.stderr
        assert f"{name}.txt" in result.stdout
        assert engine.client.remove_folder(path=folder.path).path == folder.path
        assert engine.client.documents() == []

        paths = resolve_paths(env={"RAGDOLL_HOME": str(home)})
        log = paths.engine_log.read_text(encoding="utf-8")
        assert "Logging error" not in log
        assert _modes(home) == []  # the old install fixed, everything new private
        assert stat.S_IMODE(home.stat().st_mode) == 0o700  # and the home folder itself


@pytest.mark.skipif(os.name != "posix", reason="byte names are POSIX")
def test_a_byte_name_and_a_real_name_that_looks_like_its_encoding_stay_two_files(
    tmp_path: Path,
) -> None:
    """`lamp\\xe9.txt` (Latin-1) was kept as `lamp\\uefe9.txt`, exactly the name of a
    real file whose name holds that private-use character: one path for two files,
    each rescan said "1 ingested, 1 unchanged", and a deleted one's text stayed."""
    docs = tmp_path / "docs"
    docs.mkdir()
    byte_name = os.fsencode(docs) + b"/lamp" + b"\xe9" + b".txt"
    with open(byte_name, "w", encoding="utf-8") as f:
        f.write("The brass lamp in the hall takes a candle bulb.\n")
    real = docs / "lamp\uefe9.txt"
    real.write_text("The paper lantern on the porch is folded every winter.\n", encoding="utf-8")

    with running_engine(home=tmp_path / "home") as engine:
        assert engine.ingest(docs).state == "done"
        listed = {d.path for d in engine.client.documents()}
        assert len(listed) == 2, listed
        again = engine.ingest(docs)
        assert again.files_skipped == 2 and again.files_indexed == 0
        for query, word in (("brass lamp bulb", "brass"), ("paper lantern porch", "lantern")):
            hits = engine.client.search(query=query, k=1).hits
            assert hits and word in hits[0].text
            assert from_store(hits[0].path).exists()  # each path leads to its own file
        os.unlink(byte_name)
        assert engine.ingest(docs).state == "done"
        assert len(engine.client.documents()) == 1
        hits = engine.client.search(query="brass lamp bulb", k=5).hits
        assert all("brass" not in h.text for h in hits)
