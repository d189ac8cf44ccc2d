from pathlib import Path

from engine.json_file import set_aside, write_json


def test_written_whole_and_set_aside_when_damaged(tmp_path: Path) -> None:
    file = tmp_path / "deeper" / "x.json"
    write_json(file=file, data={"a": 1})
    assert file.read_text(encoding="utf-8") == '{\n  "a": 1\n}'
    assert not file.with_suffix(".tmp").exists()
    aside = set_aside(file=file, what="x", error=ValueError("bad"))
    assert aside == file.with_suffix(".broken") and aside.exists() and not file.exists()
