"""Decoupled retrieval and generation pipelines with backlog-aware batching (issue #6)."""
