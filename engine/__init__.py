"""RAGDoll's engine: the runtime (engine/runtime), the RAG core (engine/rag) and the
service (engine/service).

OpenMP's threads wait passively in every process that imports the engine before torch
(the engine process, the window, the command line). libgomp reads OMP_WAIT_POLICY once,
when it loads, and by default a thread spins after each parallel region; torch's threads
spinning after a prefill's elementwise operations took 18% of a prefill's samples while
its matmuls ran on the native kernels' own pool, and on a busy machine the prefill ran at
a third of its speed (docs/executor.md, "Threads"). A value the person set is kept.
"""

import os

# The person's own OMP_WAIT_POLICY (None: unset): benchmarks run a peer (llama.cpp, which
# uses OpenMP too) as its users would, not with the engine's choice.
USER_OPENMP_WAIT = os.environ.get("OMP_WAIT_POLICY")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
