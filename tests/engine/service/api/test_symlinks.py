"""A symbolic link in a watched folder never lets an outside file in, through the
real engine: not when the folder is ingested, not when the watcher sees a new link,
not at the start-up rescan. A link to a file inside a watched folder still works.
What an older version read through such a link leaves the index at the next start."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest

from engine.errors import EngineRequestError
from engine.paths import resolve_paths
from engine.rag.ingest.discovery import LINK_LOOP, OUTSIDE, OUTSIDE_FOLDER, OUTSIDE_INDEXED
from engine.rag.ingest.safe_open import SWAPPED
from tests.support.engine import RunningEngine, running_engine

SECRET = "The vault combination is 31-41-59."
NUMBERED_PARAGRAPHS = 300  # the long file: ~3 s of chunking and embedding on 2 cores
INSIDE = "The greenhouse is watered at dawn with rain water."


def _leaked(engine: RunningEngine, *, secret_dir: Path) -> list[str]:
    """Every way the outside text or file could come back, as a list of what did."""
    client = engine.client
    leaks = [d.path for d in client.documents() if Path(d.path).is_relative_to(secret_dir)]
    hits = client.search(query="vault combination", k=20).hits
    leaks += [h.path for h in hits if "31-41-59" in h.text]
    endpoint = client.endpoint
    with httpx.Client(
        base_url=endpoint.base_url,
        headers={"Authorization": f"Bearer {endpoint.token}"},
        trust_env=False,
    ) as http:
        for hit in hits:
            view = http.get(f"/v1/chunks/{hit.chunk_id}/source").json()
            if "31-41-59" in view.get("page_text", ""):
                leaks.append(f"source of {hit.chunk_id}")
    answer = client.ask(question="What is the vault combination?")
    leaks += [c.path for c in answer.citations if "31-41-59" in c.text]
    return leaks


def _wait_for_document(engine: RunningEngine, *, name: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(Path(d.path).name == name for d in engine.client.documents()):
            return
        time.sleep(0.2)
    raise AssertionError(f"{name} was never indexed")


def test_links_leading_out_of_the_watched_folders_are_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET + "\n", encoding="utf-8")
    (outside / "later.md").write_text(SECRET + " (later)\n", encoding="utf-8")
    (outside / "offline.md").write_text(SECRET + " (offline)\n", encoding="utf-8")
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "sub" / "greenhouse.md").write_text(INSIDE + "\n", encoding="utf-8")
    os.symlink(outside / "secret.md", docs / "link-out.md")
    os.symlink("../outside", docs / "folder-out")  # a linked folder is not walked
    os.symlink("../docs", docs / "sub" / "folder-in")  # nor one inside: it is walked anyway
    os.symlink("sub/greenhouse.md", docs / "link-in.md")  # inside: may stay
    os.symlink("loop.md", docs / "loop.md")
    home = tmp_path / "home"
    listed = {"link-out.md": OUTSIDE, "folder-out": OUTSIDE_FOLDER, "loop.md": LINK_LOOP}

    with running_engine(home=home) as engine:
        progress = engine.ingest(docs)
        assert progress.state == "done"
        skipped = {Path(e.path).name: e.reason for e in progress.errors}
        assert skipped == listed  # a folder link out is listed too, as file links are
        # ... and the library's error list says what the job said.
        assert {Path(e.path).name: e.reason for e in engine.client.errors()} == listed
        names = {Path(d.path).name for d in engine.client.documents() if d.status == "indexed"}
        assert names == {"greenhouse.md"}  # the inside link leads to it, once
        assert _leaked(engine, secret_dir=outside) == []

        # The watcher: a new link to an outside file, beside a new real file.
        os.symlink(outside / "later.md", docs / "new-link.md")
        (docs / "sentinel.md").write_text("Sentinel: the bees swarm in May.\n", encoding="utf-8")
        _wait_for_document(engine, name="sentinel.md")
        assert _leaked(engine, secret_dir=outside) == []

    # While the engine is off: the start-up rescan finds one more.
    os.symlink(outside / "offline.md", docs / "offline-link.md")
    (docs / "sentinel-2.md").write_text("Second sentinel: hives in March.\n", encoding="utf-8")
    with running_engine(home=home) as engine:
        _wait_for_document(engine, name="sentinel-2.md")
        assert _leaked(engine, secret_dir=outside) == []
        errors = [(Path(e.path).name, e.reason) for e in engine.client.errors()]
        assert sorted(errors) == sorted(
            [*listed.items(), ("new-link.md", OUTSIDE), ("offline-link.md", OUTSIDE)]
        )
        log = resolve_paths(env={"RAGDOLL_HOME": str(home)}).engine_log.read_text("utf-8")
        for link in ("link-out.md", "new-link.md", "offline-link.md"):
            assert f"{link} is a symbolic link that leads outside every watched folder" in log


def test_what_an_older_version_read_through_a_link_out_leaves_at_the_next_start(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET + "\n", encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "greenhouse.md").write_text(INSIDE + "\n", encoding="utf-8")
    home = tmp_path / "home"
    paths = resolve_paths(env={"RAGDOLL_HOME": str(home)})

    # The index an older version left: it followed docs/link-out.md and stored what
    # it read under the target's real path. Made here with the real engine by
    # watching the outside folder for a while, then forgetting it behind its back.
    with running_engine(home=home) as engine:
        assert engine.ingest(docs, outside).state == "done"
        hits = engine.client.search(query="vault combination", k=5).hits
        old_chunks = [h.chunk_id for h in hits if "31-41-59" in h.text]
        assert old_chunks
    folders = json.loads(paths.folders_file.read_text(encoding="utf-8"))
    folders["folders"] = [f for f in folders["folders"] if f["path"] == str(docs.resolve())]
    paths.folders_file.write_text(json.dumps(folders), encoding="utf-8")
    os.symlink(outside / "secret.md", docs / "link-out.md")

    with running_engine(home=home) as engine:
        # The start-up rescan lists the removed document with the reason, beside
        # the link it skips (the embedder loads first: the job is seen queued).
        deadline = time.monotonic() + 60
        rescan = None
        while rescan is None:
            assert time.monotonic() < deadline, "no rescan job was seen"
            jobs = engine.client.ingest_queue().jobs
            rescan = next((j for j in jobs if j.origin == "rescan"), None)
        for progress in engine.client.ingest_events(job_id=rescan.job_id):  # noqa: B007
            pass
        assert progress.state == "done"
        reasons = {Path(e.path).name: e.reason for e in progress.errors}
        assert reasons == {"link-out.md": OUTSIDE, "secret.md": OUTSIDE_INDEXED}
        assert _leaked(engine, secret_dir=outside) == []
        endpoint = engine.client.endpoint
        with httpx.Client(
            base_url=endpoint.base_url,
            headers={"Authorization": f"Bearer {endpoint.token}"},
            trust_env=False,
        ) as http:
            for chunk_id in old_chunks:
                assert http.get(f"/v1/chunks/{chunk_id}/source").status_code == 404
        names = {Path(d.path).name for d in engine.client.documents() if d.status == "indexed"}
        assert names == {"greenhouse.md"}
    log = paths.engine_log.read_text("utf-8")
    secret = outside.resolve() / "secret.md"
    assert f"removed from the index: {secret} lies outside every watched folder" in log
    assert "link-out.md is a symbolic link that leads outside every watched folder" in log


def test_a_folder_swapped_for_a_link_after_it_was_listed_is_not_read(tmp_path: Path) -> None:
    """The job lists docs/many (61 files) and docs/zdir/secret.md; paused while it
    reads many/, zdir is moved away and a link to an outside folder put in its place.
    The listed path docs/zdir/secret.md now leads out: it must not be read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET + "\n", encoding="utf-8")
    docs = tmp_path / "docs"
    (docs / "many").mkdir(parents=True)
    for i in range(1, 61):
        (docs / "many" / f"a{i:02d}.md").write_text(
            f"Seed tray {i} holds {i * 3} basil seedlings.\n", encoding="utf-8"
        )
    # many/'s first file is long: the job is still reading it, or the short files after
    # it, when the pause comes, however late the test's poll runs on a loaded machine
    # (60 short files alone were sometimes all read before it). Not many/'s last: the
    # job starts parsing the next file (zdir's) while it embeds one.
    long_file = "\n\n".join(
        f"Bed {i} of the walled garden grows {i % 7 + 2} rows of leeks and chard." * 12
        for i in range(NUMBERED_PARAGRAPHS)
    )
    (docs / "many" / "a00-long.md").write_text(long_file + "\n", encoding="utf-8")
    (docs / "zdir").mkdir()
    (docs / "zdir" / "secret.md").write_text("The shed key hangs by the door.\n", "utf-8")

    with running_engine(home=tmp_path / "home") as engine:
        client = engine.client
        job = client.add_folder(path=str(docs)).job
        assert job is not None
        deadline = time.monotonic() + 120
        while client.ingest_progress(job_id=job.job_id).files_total == 0:
            assert time.monotonic() < deadline, "the job listed nothing"
            time.sleep(0.02)
        client.pause_ingest()  # the job stops after the file in hand, in many/
        while client.ingest_progress(job_id=job.job_id).current is not None:
            assert time.monotonic() < deadline, "the job did not pause"
            time.sleep(0.05)
        paused = client.ingest_progress(job_id=job.job_id)
        assert paused.files_total == 62 and paused.files_done < 61, paused

        os.rename(docs / "zdir", tmp_path / "zdir-moved")
        os.symlink(outside, docs / "zdir")
        client.resume_ingest()
        progress = paused
        for progress in client.ingest_events(job_id=job.job_id):  # noqa: B007
            pass
        assert progress.state == "done"
        swapped = str(docs / "zdir" / "secret.md")
        assert {e.path: e.reason for e in progress.errors} == {swapped: SWAPPED}
        (docs / "sentinel.md").write_text("Sentinel: the bees swarm in May.\n", "utf-8")
        _wait_for_document(engine, name="sentinel.md")  # the watcher saw the swap too
        while client.ingest_queue().jobs:
            assert time.monotonic() < deadline + 60, "the watcher's jobs did not end"
            time.sleep(0.1)
        assert _leaked(engine, secret_dir=outside) == []
        indexed = [d.path for d in client.documents() if d.status == "indexed"]
        assert not any(Path(p).is_relative_to(docs / "zdir") for p in indexed)

        # The source route checks the path too: many/ swapped for a link while the
        # queue is paused (the watcher's job waits), its passages are no longer served.
        hit = client.search(query="basil seedlings in seed tray 7", k=1).hits[0]
        assert Path(hit.path).parent == docs / "many"
        assert client.source(chunk_id=hit.chunk_id).page_text
        client.pause_ingest()
        os.rename(docs / "many", tmp_path / "many-moved")
        os.symlink(tmp_path / "many-moved", docs / "many")
        with pytest.raises(EngineRequestError) as refused:
            client.source(chunk_id=hit.chunk_id)
        assert refused.value.status == 404
        client.resume_ingest()
