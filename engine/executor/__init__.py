"""Layer-streaming executor: runs a Hugging Face causal LM under a Placement.

weights.py (where tensors live, how they are read), prefetch.py (when they move: the copy
thread), forward.py (layer-by-layer forward), generate.py (batched generation),
bench.py (first measurements). See docs/executor.md.
"""
