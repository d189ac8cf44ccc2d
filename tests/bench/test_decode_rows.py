"""The decode-rows benchmark refuses what it cannot measure before opening a model."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import decode_rows


@pytest.mark.parametrize("extra", [["--answer-tokens", "3"], ["--rows", "0,4"]])
def test_bad_options_are_refused_before_the_model_is_opened(
    extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        decode_rows.main(["--model", str(tmp_path / "absent.gguf"), *extra])
    assert stopped.value.code == 2
    assert "must be at least" in capsys.readouterr().err
