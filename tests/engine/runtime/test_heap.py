"""Freed memory given back: a thread's freed heap, held by glibc, is returned."""

import subprocess
import sys

import pytest

_CHILD = """
import threading
import numpy as np
from engine.runtime.heap import give_back_freed_memory

def rss_mb():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024

kept = []

def work():
    # 100 KB blocks (under the mmap threshold: the heap), the last one kept so the
    # heap's top cannot shrink by itself.
    blocks = [np.ones(12_800) for _ in range(3_000)]
    kept.append(blocks[-1])
    del blocks

t = threading.Thread(target=work)
t.start()
t.join()
before = rss_mb()
give_back_freed_memory()
print(before, rss_mb())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's arenas (Linux)")
def test_a_thread_s_freed_heap_is_given_back() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True, timeout=120
    )
    before, after = (int(x) for x in out.stdout.split())
    assert before - after >= 150, (before, after)  # of the 300 MB freed
