"""Benchmarks behind `ragdoll bench KIND`: one module per kind, each exposing
`add_arguments(parser)` and `run(args) -> dict` (see app/commands/bench.py)."""
