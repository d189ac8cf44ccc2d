"""Watched folders, collections, search and the queue, on the real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import EngineRequestError
from engine.service.client import folders_to_grant
from tests.support.engine import RunningEngine


def test_collections_and_search(api_engine: RunningEngine, notes_dir: Path) -> None:
    client = api_engine.client
    (collection,) = client.collections()
    assert (collection.name, collection.folders) == ("default", [str(notes_dir)])
    assert collection.documents == 2 and collection.chunks >= 2
    result = client.search(query="When is the honey extracted?", k=2)
    assert result.hits[0].path.endswith("bees.md") and result.hits[0].index == 1
    assert client.search(query="honey", collection="default").hits
    assert client.search(query="honey", collection="elsewhere").hits == []
    queue = client.queue()
    assert queue.ingest_jobs == [] and not queue.shutting_down


def test_the_hardware_report_measures_the_index(api_engine: RunningEngine) -> None:
    """What the Hardware panel draws: the index's files on disk and what search
    holds in memory, measured on the running engine (not "0.00 GiB")."""
    client = api_engine.client
    index = client.hardware().index
    assert index is not None
    assert index.chunks == client.status().chunks > 0
    assert index.disk_bytes > 10_000  # LanceDB tables of real chunks with vectors
    assert index.resident_bytes >= 0


def test_adding_and_removing_a_folder(api_engine: RunningEngine, tmp_path: Path) -> None:
    client = api_engine.client
    extra = tmp_path / "recipes"
    extra.mkdir()
    (extra / "bread.txt").write_text("Bread dough rests for two hours before baking.\n")
    with pytest.raises(EngineRequestError) as refused:
        client.ingest(paths=[str(extra)])
    assert refused.value.status == 403
    added = client.add_folder(path=str(extra), collection="kitchen")
    assert added.folder.path == str(extra.resolve()) and added.job is not None
    for _ in client.ingest_events(job_id=added.job.job_id):
        pass
    names = {c.name: c.documents for c in client.collections()}
    assert names == {"default": 2, "kitchen": 1}
    assert client.remove_folder(path=str(extra)).collection == "kitchen"
    assert not any(d.path.endswith("bread.txt") for d in client.documents())
    for bad, status in (("/", 400), (str(tmp_path / "missing"), 400)):
        with pytest.raises(EngineRequestError) as e:
            client.add_folder(path=bad)
        assert e.value.status == status
    with pytest.raises(EngineRequestError) as e:
        client.remove_folder(path=str(tmp_path))
    assert e.value.status == 404


def test_folders_to_grant(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "a" / "b"
    b.mkdir(parents=True)
    (b / "f.txt").write_text("x")
    assert folders_to_grant(paths=[str(b / "f.txt"), str(a)], watched=[]) == [str(a)]
    assert folders_to_grant(paths=[str(b)], watched=[str(a)]) == []
    assert folders_to_grant(paths=[str(tmp_path / "missing.txt")], watched=[]) == [str(tmp_path)]
    assert folders_to_grant(paths=["/missing-at-the-root"], watched=[]) == []
