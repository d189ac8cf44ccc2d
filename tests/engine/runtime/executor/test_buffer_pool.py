"""The weight store's buffer pool: what it takes back."""

from __future__ import annotations

import torch

from engine.runtime.executor.buffer_pool import BufferPool


def test_the_pool_takes_back_only_the_buffers_it_made() -> None:
    pool = BufferPool()
    made = pool.take((4, 4), torch.float32)
    foreign = torch.empty((4, 4), dtype=torch.float32)
    pool.give([made, foreign, made.to(torch.bfloat16)])
    assert pool.held_bytes() == made.numel() * 4
    assert pool.take((4, 4), torch.float32) is made
    # A buffer only the pool holds is dropped by clear() under the pool's lock: its
    # bookkeeping callback runs right there and must not wait for that lock.
    pool.give([pool.take((2,), torch.float32)])
    pool.clear()
    assert pool.held_bytes() == 0
