"""The int8 quantization's own process: the calibration inputs it is handed, and a
failure that reaches the engine as an error with the child's words, not a crash."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.rag.ingest import int8_embedder, openvino_embedder
from engine.rag.ingest.int8_quantizer import load_feeds, quantize_in_child, save_feeds


def test_the_calibration_batches_reach_the_child_as_they_were(tmp_path: Path) -> None:
    feeds = [
        {
            "input_ids": np.arange(6, dtype=np.int64).reshape(2, 3),
            "attention_mask": np.ones((2, 3)),
        },
        {
            "input_ids": np.arange(8, dtype=np.int64).reshape(2, 4),
            "attention_mask": np.ones((2, 4)),
        },
    ]
    file = tmp_path / "feeds.npz"
    save_feeds(feeds=feeds, file=file)
    back = load_feeds(file)
    assert len(back) == 2
    for got, want in zip(back, feeds, strict=True):
        assert sorted(got) == sorted(want)
        for name, value in want.items():
            assert got[name].dtype == np.int64 and np.array_equal(got[name], value)


@pytest.mark.skipif(
    not (openvino_embedder.openvino_installed() and int8_embedder.nncf_installed()),
    reason="OpenVINO or NNCF is not installed",
)
def test_a_quantization_that_fails_in_its_process_is_an_error_with_its_reason(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not an onnx model")
    out = tmp_path / "model.int8.xml"
    feeds = [{"input_ids": np.ones((1, 4), dtype=np.int64)}]
    with pytest.raises(RuntimeError, match="int8 quantization process ended with") as e:
        quantize_in_child(onnx=broken, out=out, feeds=feeds)
    assert "Unable to read the model" in str(e.value)  # the child's words, on one line
    assert "\n" not in str(e.value)
    assert not out.exists() and not list(tmp_path.glob("*.npz"))
