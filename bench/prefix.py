"""`ragdoll bench prefix`: the prefix KV cache's time to first token (see prefix_reuse)."""

from bench.prefix_reuse import add_arguments, measure_ttft_prefix_reuse, run

__all__ = ["add_arguments", "measure_ttft_prefix_reuse", "run"]
