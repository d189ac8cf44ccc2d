"""Turning files into indexed passages: parsers, chunker, embedder, ingestion jobs."""
