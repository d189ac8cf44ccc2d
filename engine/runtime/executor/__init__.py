"""Layer-streaming executor: runs a Hugging Face causal LM under a Placement.

weights.py (where tensors live, how they are read), prefetch.py (when they move: the copy
thread), kv.py (the KV cache across tiers), forward.py (layer-by-layer forward, placement
changes, out-of-memory degradation), generate.py (batched generation), compat.py (a
transformers-shaped generate). The benchmark is bench/offload.py. See
docs/executor.md.
"""
