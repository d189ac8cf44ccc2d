"""llama.cpp as a peer in `ragdoll bench offload --peers llama.cpp`, through llama-cpp-python.

llama-cpp-python is an optional benchmark extra (`bench-peers` in pyproject.toml), never a
dependency of the app or of CI: it compiles llama.cpp from its source distribution (about
5 minutes on an idle machine). Without it the benchmark prints why llama.cpp was skipped
and how to install it.

The weights llama.cpp runs are the benchmark's random model converted by llama.cpp's own
`convert_hf_to_gguf.py` (from the llama-cpp-python sdist's vendor/llama.cpp, with its
gguf-py) to F32, then quantized by `llama_model_quantize` to Q8_0 / Q4_0 with `pure` set
(every matrix in the one type, as the executor's formats are). The executor reads the very
same GGUF files, so both run identical weights. Two things of the converter are bypassed
because the random model's tokenizer is not a real model's: the BPE pre-tokenizer check
(a hash of known tokenizers; the file says "default") and Qwen2's SentencePiece attempt.
Token ids are fed directly, so the tokenizer never affects the comparison.

Greedy decoding runs on llama.cpp's C API (llama_batch / llama_decode), one sequence per
row, so that batch 8 is 8 sequences in one decode call, as llama.cpp's server batches.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

INSTALL_HINT = (
    'CMAKE_ARGS="-DGGML_NATIVE=ON" pip install -c constraints.txt -e ".[bench-peers]"  '
    "(builds llama-cpp-python 0.3.36 from source, ~5 min)"
)
SOURCE_ENV = "RAGDOLL_LLAMA_CPP_SOURCE"
# llama.cpp's file types (LLAMA_FTYPE_*) for the formats compared.
FTYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7}

_CONVERT = """
import sys
source = sys.argv.pop(1)
sys.path[:0] = [source, source + "/gguf-py"]
import convert_hf_to_gguf as convert
from conversion import base, qwen
# The random model's tokenizer is no published model's: skip the pre-tokenizer hash check
# and Qwen2's SentencePiece attempt (token ids are fed directly; tensors are untouched).
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "default"
qwen.Qwen2Model.set_vocab = lambda self: self._set_vocab_gpt2()
convert.main()
"""


def unavailable_reason() -> str | None:
    """Why llama.cpp cannot run here (None: it can)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return f"llama-cpp-python is not installed; install the optional extra: {INSTALL_HINT}"
    return None


def converter_source(explicit: Path | None = None) -> Path | None:
    """llama.cpp's source folder holding convert_hf_to_gguf.py (the llama-cpp-python sdist's
    vendor/llama.cpp): `explicit`, else $RAGDOLL_LLAMA_CPP_SOURCE."""
    for candidate in (explicit, os.environ.get(SOURCE_ENV)):
        if candidate and (Path(candidate) / "convert_hf_to_gguf.py").is_file():
            return Path(candidate)
    return None


def convert_f32(*, model_dir: Path, out: Path, source: Path) -> Path:
    """`model_dir` as an F32 GGUF by llama.cpp's own converter (written once)."""
    if out.is_file():
        return out
    partial = out.with_name(out.name + ".partial")
    argv = [sys.executable, "-c", _CONVERT, str(source), str(model_dir)]
    argv += ["--outfile", str(partial), "--outtype", "f32"]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"llama.cpp's convert_hf_to_gguf.py failed:\n{done.stderr[-2000:]}")
    partial.rename(out)
    return out


def quantize(*, source: Path, out: Path, fmt: str, threads: int) -> Path:
    """`source` (F32 GGUF) quantized by llama.cpp to `fmt`, every matrix in that type."""
    if out.is_file():
        return out
    llama_cpp = _quiet_llama()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[fmt]
    params.nthread = threads
    params.pure = True
    partial = out.with_name(out.name + ".partial")
    rc = llama_cpp.llama_model_quantize(
        str(source).encode(), str(partial).encode(), ctypes.byref(params)
    )
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize to {fmt} failed ({rc})")
    partial.rename(out)
    return out


def _quiet_llama() -> Any:
    """llama_cpp with its log (every tensor it loads or quantizes) limited to errors."""
    import llama_cpp
    from llama_cpp import _logger

    _logger.set_verbose(False)
    return llama_cpp


class LlamaRunner:
    """One GGUF file loaded by llama.cpp (memory-mapped); greedy prefill + decode of a
    batch of rows, one llama.cpp sequence per row."""

    def __init__(
        self, *, gguf: Path, threads: int, max_batch: int, max_tokens: int, repack: bool
    ) -> None:
        llama_cpp = _quiet_llama()
        self._ll = llama_cpp
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0
        params.load_mode = llama_cpp.LLAMA_LOAD_MODE_MMAP
        # Repacking (e.g. Q4_0 into interleaved blocks for AVX2) copies the weights into
        # anonymous memory; without it the weights stay in the mmap and can be paged.
        params.use_extra_bufts = repack
        self._model = llama_cpp.llama_model_load_from_file(str(gguf).encode(), params)
        if not self._model:
            raise RuntimeError(f"llama.cpp could not load {gguf}")
        vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._vocab_size = int(llama_cpp.llama_vocab_n_tokens(vocab))
        self._threads = threads
        self._max_batch = max_batch
        self._max_tokens = max_tokens

    def run(self, *, prompts: torch.Tensor, tokens: int, read_bytes: Callable[[], int]) -> Any:
        from bench.offload_systems import Run

        ll = self._ll
        batch, width = prompts.shape
        params = ll.llama_context_default_params()
        params.n_ctx = batch * self._max_tokens
        params.n_batch = params.n_ubatch = max(512, batch * width)
        params.n_seq_max = batch
        params.n_threads = params.n_threads_batch = self._threads
        params.kv_unified = True
        ctx = ll.llama_init_from_model(self._model, params)
        if not ctx:
            raise RuntimeError("llama.cpp could not make a context")
        lb = ll.llama_batch_init(max(batch * width, batch), 0, 1)
        rows = prompts.tolist()
        out: list[list[int]] = [[] for _ in range(batch)]
        try:
            start = time.perf_counter()
            items = [(r, p, tok) for r in range(batch) for p, tok in enumerate(rows[r])]
            last = self._decode(ctx, lb, items, width=width)
            prefill_s = time.perf_counter() - start
            before = read_bytes()
            start = time.perf_counter()
            for step in range(tokens):
                next_ids = [int(np.argmax(row)) for row in last]
                for r in range(batch):
                    out[r].append(next_ids[r])
                items = [(r, width + step, next_ids[r]) for r in range(batch)]
                last = self._decode(ctx, lb, items, width=1)
            decode_s = time.perf_counter() - start
            decode_read = read_bytes() - before
            for r in range(batch):
                out[r].append(int(np.argmax(last[r])))
        finally:
            ll.llama_batch_free(lb)
            ll.llama_free(ctx)
        run = Run(
            system="llama.cpp",
            batch=batch,
            load_s=0.0,
            prefill_s=prefill_s,
            decode_s=decode_s,
            prompt_tokens=width,
            decode_tokens=tokens,
            tokens=out,
        )
        return run, decode_read

    def _decode(
        self, ctx: Any, lb: Any, items: list[tuple[int, int, int]], *, width: int
    ) -> list[np.ndarray]:
        """Decode (row, position, token) items; the logits of each row's last item."""
        ll = self._ll
        for i, (row, pos, tok) in enumerate(items):
            lb.token[i] = tok
            lb.pos[i] = pos
            lb.n_seq_id[i] = 1
            lb.seq_id[i][0] = row
            lb.logits[i] = 1 if (i + 1) % width == 0 else 0
        lb.n_tokens = len(items)
        rc = ll.llama_decode(ctx, lb)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed ({rc})")
        rows = len(items) // width
        out = []
        for r in range(rows):
            ptr = ll.llama_get_logits_ith(ctx, (r + 1) * width - 1)
            out.append(np.ctypeslib.as_array(ptr, shape=(self._vocab_size,)).copy())
        return out
