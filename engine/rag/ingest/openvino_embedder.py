"""An OpenVINO path for a sentence-transformers model on the CPU.

OpenVINO reads the ONNX file that engine/rag/ingest/onnx_embedder.py exports once
into the cache folder (the same export, the same `.failed` rule: a model that
failed here is not tried again at every start) and compiles it for the CPU with
bf16 as its inference precision where this CPU computes bf16 natively (AVX-512
BF16 or AMX), float32 elsewhere. Only the runtime's `Core` is used: the model
conversion tools, which alone carry OpenVINO's opt-in telemetry, are not.

After compiling, the path is checked against torch in float32 on probe texts
(cosine ≥ `MIN_COSINE`), and kept only if it passes. Measured on MiniLM and the
real manuals' chunks (docs/benchmarks.md, "Embedder back-ends"): with the bf16
hint, cosine ≥ 0.9999 to float32 torch on less CPU time per chunk than torch
with bf16 weights.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from engine.environ import environment
from engine.rag.ingest.onnx_embedder import (
    MIN_COSINE,
    PROBES,
    OnnxEncoder,
    SharedTokenizer,
    _mark,
    export_onnx,
    onnx_file,
    probe_cosine,
    torch_probes,
)
from engine.rag.ingest.plain_model import PlainModel

log = logging.getLogger(__name__)

_NO_TELEMETRY = {"CI": "true", "NNCF_CI": "1"}


class _Input:
    def __init__(self, name: str) -> None:
        self.name = name


class OpenVinoSession:
    """An ONNX Runtime session's `get_inputs` and `run` over a compiled OpenVINO
    model, so that `OnnxEncoder` tokenises and pools for both runtimes. An infer
    request runs one inference at a time: each call takes a spare one (a
    question encoded beside an ingestion batch gets a request of its own)."""

    def __init__(self, *, compiled: Any) -> None:
        self._compiled = compiled
        self._output = compiled.outputs[0]
        self._spare: list[Any] = []
        self._lock = threading.Lock()

    def get_inputs(self) -> list[_Input]:
        return [_Input(port.get_any_name()) for port in self._compiled.inputs]

    def run(self, _outputs: Any, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        with self._lock:
            request = self._spare.pop() if self._spare else self._compiled.create_infer_request()
        try:
            result = request.infer(feed)
            # Copied: the request's output buffer is reused by its next inference.
            hidden = np.array(result[self._output], dtype=np.float32, copy=True)
        finally:
            with self._lock:
                self._spare.append(request)
        return [hidden]


def openvino_installed() -> bool:
    """OpenVINO is optional at run time: without it, the next back-end."""
    try:
        import_openvino()
    except ImportError:
        return False
    return True


def import_openvino() -> Any:
    """OpenVINO with its telemetry declined. `import openvino` imports its model
    conversion tools, which start openvino-telemetry with consent assumed when
    the person never answered (no consent file), write a client id under the
    home folder and send an "import" event to Google Analytics; nothing may
    leave this machine. Those tools decline in CI (`CI=true`): it is set for
    the first import only (later imports are the module already loaded)."""
    import sys

    if "openvino" in sys.modules:
        return sys.modules["openvino"]
    with declined_telemetry():
        import openvino

    return openvino


@contextmanager
def declined_telemetry() -> Iterator[None]:
    """`CI=true` (openvino-telemetry declines in CI) and `NNCF_CI=1` (NNCF takes
    its no-op telemetry) while OpenVINO or NNCF is imported, as they were before."""
    with environment(_NO_TELEMETRY):
        yield


def openvino_precision() -> str:
    """ "bf16" where a bf16 matmul is fast on this CPU, else "f32"."""
    from engine.rag.ingest import bf16_embedder

    return "bf16" if bf16_embedder.bf16_applies() else "f32"


def compile_openvino(*, file: Path, precision: str) -> Any:
    """The model file (ONNX, or OpenVINO's IR) compiled for this CPU, one stream (the
    engine orders its encodes itself) over the runtime's own choice of threads."""
    ov = import_openvino()
    core = ov.Core()
    return core.compile_model(
        str(ir_file(ov=ov, core=core, file=file)),
        "CPU",
        {"INFERENCE_PRECISION_HINT": precision, "PERFORMANCE_HINT": "LATENCY"},
    )


def ir_file(*, ov: Any, core: Any, file: Path) -> Path:
    """An ONNX file's OpenVINO IR beside it (`<name>.ov.xml` and `.bin`), written once;
    an IR file as it is; the ONNX file itself when the IR cannot be written. Compiled
    from the IR, the weights are the .bin file's pages, mapped: the question's and
    ingestion's compiled copies share them and the system may take them back, where a
    compile from ONNX held its own copy (multilingual-e5: about 470 MB each)."""
    if file.suffix == ".xml":
        return file
    xml = file.with_name(f"{file.stem}.ov.xml")
    if xml.exists() and xml.with_suffix(".bin").exists():
        return xml
    # Written under names of this thread's own, then renamed: .bin first, so an .xml
    # is never without its weights.
    part = file.with_name(f".{file.stem}.{os.getpid()}.{threading.get_ident()}.ov.xml")
    try:
        ov.save_model(core.read_model(str(file)), str(part), compress_to_fp16=False)
        part.with_suffix(".bin").replace(xml.with_suffix(".bin"))
        part.replace(xml)
    except (OSError, RuntimeError) as e:  # a full disk: compiled from ONNX, as before
        log.warning("embedder %s: no OpenVINO IR written (%s)", file.name, e)
        for leftover in (part, part.with_suffix(".bin")):
            leftover.unlink(missing_ok=True)
        return file
    return xml


class OpenVinoEncoder(OnnxEncoder):
    """`OnnxEncoder` over OpenVINO; `sibling` compiles again in the calling
    thread, so that the runtime's worker threads of ingestion's copy are
    started by ingestion's (lower-priority) thread."""

    def __init__(self, *, precision: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.precision = precision

    def sibling(self, *, file: Path | None = None) -> OpenVinoEncoder:
        """This encoder again, compiled in the calling thread (its runtime threads
        inherit that thread's priority), over `file` if given (another model of
        the same inputs and outputs: the int8 copy) or this one's."""
        file = self._file if file is None else file
        return OpenVinoEncoder(
            session=OpenVinoSession(compiled=compile_openvino(file=file, precision=self.precision)),
            tokenizer=self._tokenizer,
            pooling=self._pooling,
            max_tokens=self._max_tokens,
            file=file,
            precision=self.precision,
        )


def load_openvino_encoder(
    *,
    plain: PlainModel,
    tokenizer: Any,
    torch_model: Callable[[], Any],
    cache_dir: Path,
    precision: str | None = None,
) -> OpenVinoEncoder | None:
    """The OpenVINO path for the model `plain` describes (on the CPU), or None when
    OpenVINO is not installed or the path does not give torch's vectors; the reason is
    logged. `torch_model` loads the library's model (float32, on the CPU): called only
    to export, or to make the probes' vectors (`torch_probes`)."""
    if not Path(plain.location).is_dir():
        return None
    if not openvino_installed():
        log.info("embedder %s: OpenVINO is not installed", plain.location)
        return None
    precision = precision or openvino_precision()
    file = onnx_file(location=plain.location, cache_dir=cache_dir)
    failed = file.with_name(f"{file.name}.openvino-{precision}.failed")
    if failed.exists():
        return None
    try:
        if not file.exists():
            log.info("exporting the embedder to ONNX: %s", file)
            export_onnx(model=torch_model(), file=file)
        encoder = OpenVinoEncoder(
            session=OpenVinoSession(compiled=compile_openvino(file=file, precision=precision)),
            tokenizer=SharedTokenizer(copy.deepcopy(tokenizer)),
            pooling=plain.pooling,
            max_tokens=plain.max_tokens,
            file=file,
            precision=precision,
        )
        got = encoder.encode(PROBES, batch_size=len(PROBES))
    except Exception as e:  # any failure means: the next back-end
        log.warning("embedder %s: the OpenVINO path failed (%s)", plain.location, e)
        _mark(failed, reason=str(e))
        return None
    cosine = probe_cosine(got, torch_probes(file=file, torch_model=torch_model))
    if cosine < MIN_COSINE:
        log.warning(
            "embedder %s: OpenVINO %s cosine %.5f to torch", plain.location, precision, cosine
        )
        _mark(failed, reason=f"cosine {cosine:.5f} to torch")
        return None
    return encoder
