"""`ragdoll bench ingest` in its smallest form: the figures are there and a
rescan of unchanged files embeds nothing."""

from __future__ import annotations

import argparse

import pytest

from bench import ingest


def test_the_benchmark_measures_ingestion_and_a_rescan_without_embeddings() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    ingest.add_arguments(parser)
    args = parser.parse_args(
        ["--quick", "--json", "--pdfs", "1", "--pages", "2", "--rescan-files", "200"]
    )
    figures = ingest.run(args)
    assert figures["pdf_pages"] == 2
    assert figures["pages_per_s"] > 0 and figures["chunks_per_s"] > 0
    assert figures["ingest_embeddings"] == figures["chunks"] > 0
    assert figures["rescan_files"] == 200
    assert figures["rescan_embeddings"] == 0 and figures["rescan_touched_embeddings"] == 0
    assert figures["rescan_seconds"] > 0


def test_many_small_files_of_real_text_give_files_per_s_index_size_and_rescan() -> None:
    from bench.real_docs import find_real_docs

    if find_real_docs() is None:
        pytest.skip("the real manuals are absent: python -m bench.real_docs")
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    ingest.add_arguments(parser)
    args = parser.parse_args(
        ["--json", "--parts", "small-files", "--small-files", "60", "--stand-in-embedder"]
    )
    figures = ingest.run(args)
    assert figures["small_files"] == 60 and figures["small_files_errors"] == 0
    assert figures["small_files_chunks"] >= 60 and figures["small_files_per_s"] > 0
    assert 1.0 < figures["index_ratio_settled"] < 2.0
    assert figures["rescan_skipped"] == 60
    # Compacted to one version (the pages' index, built meanwhile, may add one).
    assert all(v <= 2 for v in figures["table_versions_settled"].values())
