"""`ragdoll plan` and `ragdoll profile` through app.cli.main, in-process."""

import json
from pathlib import Path

import pytest

from app.cli import main

CONFIGS = Path(__file__).resolve().parents[4] / "resources" / "model_configs"
PF_HIGH = ["--gpu-mem", "24GiB", "--ram", "256GiB", "--disk", "8TB"]


def test_plan_json_has_the_required_keys(capsys: pytest.CaptureFixture[str]) -> None:
    config = str(CONFIGS / "llama-3.1-70b.json")
    assert main(["plan", "--model", config, *PF_HIGH, "--batch", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("weights", "kv", "workspace_bytes", "resident_partition_bytes", "max_batch"):
        assert key in out
    assert out["fits"] is True
    assert set(out["weights"]) == set(out["kv"]) == {"gpu", "cpu", "disk"}
    assert sum(out["weights"].values()) == out["model"]["weight_bytes"]
    assert out["weights"]["gpu"] > 0 and out["weights"]["cpu"] > 0


def test_plan_human_table_and_bundled_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "llama-3.1-8b", *PF_HIGH]) == 0
    out = capsys.readouterr().out
    assert "GiB" in out and "weights" in out and "fits: yes" in out


def test_plan_that_does_not_fit_is_said_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "llama-3.1-70b", "--gpu-mem", "0", "--ram", "16GB", "--disk", "40GB"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "does not fit" in out and "more memory is needed" in out
    assert main([*args, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is False and data["missing_bytes"] > 0


def test_plan_for_this_machine(ragdoll_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "qwen2-7b", "--ram", "64GiB", "--json"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    assert data["capacities"]["cpu"] == 64 * 2**30


def test_plan_rejects_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["plan", "--model", str(tmp_path / "nothing")]) == 2
    assert "no model config" in capsys.readouterr().err
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "gpt2"}))
    assert main(["plan", "--model", str(bad), *PF_HIGH]) == 2
    assert "gpt2" in capsys.readouterr().err
    assert main(["plan", "--model", "llama-3.1-8b", "--gpu-mem", "lots"]) == 2
    assert "not a size" in capsys.readouterr().err


def test_profile_command_reuses_the_cache(
    ragdoll_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.paths import resolve_paths
    from engine.runtime.hardware.profile import load_profile

    measured = load_profile(paths=resolve_paths(), disk_probe_bytes=64 * 2**20)
    assert main(["profile", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["measured_at"] == measured.measured_at
    assert data["fingerprint"] == measured.fingerprint
    assert main(["profile"]) == 0
    out = capsys.readouterr().out
    assert "RAM:" in out and "disk" in out
