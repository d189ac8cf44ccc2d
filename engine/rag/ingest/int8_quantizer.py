"""The int8 quantization itself, run as its own process:
`python -m engine.rag.ingest.int8_quantizer`.

NNCF is only needed once per machine, to make the int8 embedder
(engine/rag/ingest/int8_embedder.py). It runs here, in a child the engine waits for,
so that NNCF and what it loads never live in the engine's process: after NNCF
had run in a test process, a SIGALRM that interrupted a wait there ended the
process with SIGSEGV (cause not found; docs/benchmarks.md, "int8"), and the
engine takes signals too. A crash here costs only the int8 model: the engine
sees the exit code and stays on the float path.

The parent tokenizes the calibration texts and hands them over as an `.npz`
file of input arrays (one group of arrays per batch), so the child needs neither
the tokenizer nor the sentence-transformers package.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from engine.rag.child_module import run_module
from engine.rag.ingest.openvino_embedder import declined_telemetry, import_openvino

# The two activation x activation matmuls of a BERT layer as torch exports them.
_ATTENTION_PRODUCTS = [r".*/attention/self/MatMul(_1)?$"]
_TIMEOUT_S = 30 * 60  # 17-45 s on 2 loaded cores; a hung child must not hold ingestion


def save_feeds(*, feeds: list[dict[str, np.ndarray]], file: Path) -> None:
    """Batches of model inputs as one `.npz` (`<batch>/<input name>` keys)."""
    arrays = {
        f"{i:05d}/{name}": value for i, feed in enumerate(feeds) for name, value in feed.items()
    }
    with file.open("wb") as f:
        np.savez(f, **arrays)


def load_feeds(file: Path) -> list[dict[str, np.ndarray]]:
    feeds: dict[str, dict[str, np.ndarray]] = {}
    with np.load(file) as data:
        for key in sorted(data.files):
            batch, name = key.split("/", 1)
            feeds.setdefault(batch, {})[name] = np.asarray(data[key], dtype=np.int64)
    return list(feeds.values())


def quantize_in_child(*, onnx: Path, out: Path, feeds: list[dict[str, np.ndarray]]) -> None:
    """Runs this module in a child process; raises with the child's last words
    when it fails, is killed or hangs."""
    file = out.with_name(f"{out.stem}.{os.getpid()}.feeds.npz")
    save_feeds(feeds=feeds, file=file)
    try:
        run_module(
            module="engine.rag.ingest.int8_quantizer",
            args=[f"--onnx={onnx}", f"--feeds={file}", f"--out={out}"],
            timeout_s=_TIMEOUT_S,
            what="the int8 quantization",
        )
    finally:
        file.unlink(missing_ok=True)
    if not out.exists():
        raise RuntimeError("the int8 quantization process wrote no model")


def import_nncf() -> Any:
    """NNCF with its telemetry off. Unless the person opted out, NNCF sends
    usage events to Google Analytics through openvino-telemetry when it
    quantizes, and writes a client id under the home folder; nothing may leave
    this machine. Both are decided at NNCF's import: with `NNCF_CI` set it uses
    its no-op telemetry, and with `CI=true` openvino-telemetry declines (NNCF
    asks it to in CI). Both are set for the import only. Raises if the no-op
    was not taken (a later NNCF that decides otherwise): no quantization then."""
    import_openvino()  # NNCF imports it: first, with its own telemetry declined
    with declined_telemetry():
        import nncf
        from nncf.telemetry import decorator, wrapper
    if isinstance(decorator.telemetry, wrapper.NNCFTelemetry):  # the stub is not one
        raise RuntimeError("NNCF's telemetry could not be switched off")
    return nncf


def quantize(*, onnx: Path, out: Path, feeds: list[dict[str, np.ndarray]]) -> None:
    """NNCF's int8 quantization of `onnx` (weights and activations of the
    linear layers; attention's products, layer norms, softmax and GELU stay in
    float), saved as `out`. In the child process."""
    nncf = import_nncf()
    ov = import_openvino()
    model = ov.Core().read_model(str(onnx))
    names = {port.get_any_name() for port in model.inputs}
    feeds = [{k: v for k, v in f.items() if k in names} for f in feeds]
    nncf.set_log_level(logging.WARNING)  # not each skipped node
    with contextlib.redirect_stdout(io.StringIO()):
        quantized = _quantize(nncf=nncf, model=model, feeds=feeds)
    tmp = out.with_name(f"{out.stem}.{os.getpid()}.tmp.xml")
    ov.save_model(quantized, str(tmp), compress_to_fp16=False)
    tmp.with_suffix(".bin").replace(out.with_suffix(".bin"))
    tmp.replace(out)  # the .xml last: its presence means the model is whole


def _quantize(*, nncf: Any, model: Any, feeds: list[dict[str, np.ndarray]]) -> Any:
    return nncf.quantize(
        model,
        nncf.Dataset(feeds),
        model_type=nncf.ModelType.TRANSFORMER,
        preset=nncf.QuantizationPreset.PERFORMANCE,
        subset_size=len(feeds),  # one item is one batch of texts
        # Attention's own products (query x key, weights x value) stay in
        # float: quantized, they cost the most accuracy for the least time.
        ignored_scope=nncf.IgnoredScope(patterns=_ATTENTION_PRODUCTS, validate=False),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--onnx", type=Path, required=True)
    parser.add_argument("--feeds", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        quantize(onnx=args.onnx, out=args.out, feeds=load_feeds(args.feeds))
    except Exception as e:  # one line for the parent's `.failed` reason
        print(" ".join(f"{type(e).__name__}: {e}".split()), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
