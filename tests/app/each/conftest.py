"""One real engine process for the per-document tests: the reports of
tests/engine/rag/each/corpus.py in a collection named "reports"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.rag.each.corpus import write_reports
from tests.support.engine import RunningEngine, running_engine


@pytest.fixture(scope="package")
def each_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEngine]:
    root = tmp_path_factory.mktemp("each-app")
    reports = write_reports(root / "reports")
    with running_engine(home=root / "home") as running:
        added = running.client.add_folder(path=root / "reports", collection="reports")
        assert added.job is not None
        last = added.job
        for last in running.client.ingest_events(job_id=added.job.job_id):  # noqa: B007
            pass
        assert last.state == "done" and last.files_done == len(reports), last
        yield running


@pytest.fixture(scope="package")
def reports_dir(each_engine: RunningEngine) -> Path:
    (folder,) = each_engine.client.folders()
    return Path(folder.path)
