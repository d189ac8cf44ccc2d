"""EngineEnviron: every RAGDOLL_* variable read once with its meaning and default;
environment(): values set inside the block, the earlier ones (or their absence) back after it."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from engine.environ import EngineEnviron, environment, torch_kernels_forced
from engine.wire import EngineSettings, ServerSettings


def test_values_hold_inside_and_the_earlier_state_returns_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGDOLL_TEST_SET", "before")
    monkeypatch.delenv("RAGDOLL_TEST_ABSENT", raising=False)
    with environment({"RAGDOLL_TEST_SET": "inside", "RAGDOLL_TEST_ABSENT": "1"}):
        assert os.environ["RAGDOLL_TEST_SET"] == "inside"
        assert os.environ["RAGDOLL_TEST_ABSENT"] == "1"
    assert os.environ["RAGDOLL_TEST_SET"] == "before"
    assert "RAGDOLL_TEST_ABSENT" not in os.environ


def test_the_earlier_state_returns_when_the_block_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGDOLL_TEST_ABSENT", raising=False)
    with pytest.raises(RuntimeError), environment({"RAGDOLL_TEST_ABSENT": "1"}):
        raise RuntimeError("boom")
    assert "RAGDOLL_TEST_ABSENT" not in os.environ


def test_unset_variables_give_the_engines_defaults() -> None:
    assert EngineEnviron.from_environ({}) == EngineEnviron()
    defaults = EngineEnviron()
    assert defaults.auto_profile and defaults.embedder_int8 and not defaults.torch_kernels
    assert defaults.ingest_nice == 10 and defaults.reembed_batch == 256
    assert (defaults.ivf_scorer, defaults.embedder_backend) == ("auto", None)
    assert defaults.ingest_commit_files is None and defaults.embedder_cache is None


def test_each_variable_is_read_with_its_meaning(tmp_path: Path) -> None:
    got = EngineEnviron.from_environ(
        {
            "RAGDOLL_AUTO_PROFILE": "0",
            "RAGDOLL_INGEST_NICE": "40",
            "RAGDOLL_INGEST_COMMIT_FILES": "3",
            "RAGDOLL_REEMBED_BATCH": "1",
            "RAGDOLL_EMBEDDER_BACKEND": "torch",
            "RAGDOLL_EMBEDDER_CACHE": str(tmp_path),
            "RAGDOLL_EMBEDDER_INT8": "off",
            "RAGDOLL_WORDS_CACHE": str(tmp_path / "words"),
            "RAGDOLL_IVF_SCORER": " Float32 ",
            "RAGDOLL_TORCH_KERNELS": "yes",
            "RAGDOLL_HOME": str(tmp_path / "home"),
        }
    )
    assert got == EngineEnviron(
        home=tmp_path / "home",
        auto_profile=False,
        ingest_nice=19,  # clamped to what a nice value can be
        ingest_commit_files=3,
        reembed_batch=1,
        embedder_backend="torch",
        embedder_cache=tmp_path,
        embedder_int8=False,
        words_cache=tmp_path / "words",
        ivf_scorer="float32",
        torch_kernels=True,
    )
    # A value that is not a number keeps the default rather than stop the engine.
    odd = {"RAGDOLL_INGEST_NICE": "high", "RAGDOLL_INGEST_COMMIT_FILES": "many"}
    assert EngineEnviron.from_environ(odd) == EngineEnviron()
    assert EngineEnviron.from_environ({"RAGDOLL_EMBEDDER_BACKEND": ""}).embedder_backend is None
    assert EngineEnviron.from_environ({"RAGDOLL_HOME": ""}).home is None


def test_offline_is_the_persons_choice_of_ragdoll_offline_else_the_hubs() -> None:
    assert not EngineEnviron.from_environ({}).downloads_refused
    assert EngineEnviron.from_environ({"HF_HUB_OFFLINE": "1"}).downloads_refused
    said = {"HF_HUB_OFFLINE": "1", "RAGDOLL_OFFLINE": "0"}
    assert not EngineEnviron.from_environ(said).downloads_refused


def test_the_process_environment_is_read_when_none_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGDOLL_IVF_SCORER", "int8")
    monkeypatch.setenv("RAGDOLL_TORCH_KERNELS", "1")
    got = EngineEnviron.from_environ()
    assert got.ivf_scorer == "int8" and got.torch_kernels and torch_kernels_forced()


ROOT = Path(__file__).resolve().parents[2]


def test_docs_settings_lists_every_setting_and_every_variable_the_product_reads() -> None:
    """docs/settings.md is the one list of settings: a field or a RAGDOLL_* variable
    added without a row there fails here."""
    doc = (ROOT / "docs" / "settings.md").read_text()
    fields = [f.name for c in (EngineSettings, ServerSettings) for f in dataclasses.fields(c)]
    fields += [f.name for f in dataclasses.fields(EngineEnviron)]
    variables: set[str] = {"OMP_WAIT_POLICY"}
    for folder in ("engine", "app", "native", "installer"):
        for source in (ROOT / folder).rglob("*.py"):
            variables.update(re.findall(r"\"(RAGDOLL_[A-Z0-9_]+)\"", source.read_text()))
    assert len(variables) > 10  # the scan found the variables, not nothing
    missing = [name for name in [*fields, *sorted(variables)] if f"`{name}`" not in doc]
    assert not missing, f"docs/settings.md has no row for {missing}"
