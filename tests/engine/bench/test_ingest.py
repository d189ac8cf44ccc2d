"""`ragdoll bench ingest` in its smallest form: the figures are there and a
rescan of unchanged files embeds nothing."""

from __future__ import annotations

import argparse

from engine.bench import ingest


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
