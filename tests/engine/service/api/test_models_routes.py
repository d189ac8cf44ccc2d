"""The models routes on the real engine: verdicts for every recommended model, and
a download that the offline engine refuses rather than reach the network."""

from __future__ import annotations

import pytest

from engine.errors import EngineRequestError
from engine.service.models.catalogue import load_catalogue
from engine.service.models.reranker_catalogue import load_rerankers
from tests.support.engine import RunningEngine


def test_recommended_models_have_verdicts(api_engine: RunningEngine) -> None:
    result = api_engine.client.recommended_models()
    models = [m for m in result.models if m.role == "model"]
    assert [m.id for m in models] == [e.id for e in load_catalogue()]
    rerankers = [m for m in result.models if m.role == "reranker"]
    assert [m.id for m in rerankers] == [e.id for e in load_rerankers()]
    assert all(m.seconds_per_question and not m.chosen for m in rerankers)
    for m in models:
        assert m.verdict_kind in ("gpu", "offloaded", "too_large", "ram")
        assert m.params > 0 and m.weight_bytes > 0
        if m.verdict_kind == "too_large":
            assert m.missing_bytes > 0 and m.expected_tokens_per_s is None
        else:
            assert m.expected_tokens_per_s is not None and m.expected_tokens_per_s > 0
        assert not m.chosen  # the test engine answers extractively
    assert "estimates" in result.hardware_note


def test_download_is_refused_offline_and_unknown_ids_are_not_found(
    api_engine: RunningEngine,
) -> None:
    client = api_engine.client
    with pytest.raises(EngineRequestError) as refused:
        client.download_model(repo_id="Qwen/Qwen2.5-0.5B-Instruct")
    assert refused.value.status == 409
    assert str(refused.value).startswith("The engine runs offline")
    with pytest.raises(EngineRequestError) as bad:
        client.download_model(repo_id="../etc")
    assert bad.value.status in (400, 422)
    with pytest.raises(EngineRequestError) as not_gguf:
        client.download_model(repo_id="Qwen/Qwen2.5-0.5B-Instruct-GGUF", file="../config.json")
    assert not_gguf.value.status == 400 and "body.file" in str(not_gguf.value)
    with pytest.raises(EngineRequestError) as missing:
        client.download_progress(download_id="nope")
    assert missing.value.status == 404
