"""What OpenAI clients send is honoured or refused, never silently dropped: limits,
stop sequences, usage, the conversation in `messages`, sources in the text, the
legacy completions API, and errors in OpenAI's shape. The official `openai` client,
unchanged, against a real engine process (extractive mode)."""

from __future__ import annotations

import httpx
import openai
import pytest

from engine.service.api.openai_routes import EXTRACTIVE_MODEL_ID
from tests.support.engine import RunningEngine


def _client(engine: RunningEngine) -> openai.OpenAI:
    endpoint = engine.client.endpoint
    return openai.OpenAI(base_url=f"{endpoint.base_url}/v1", api_key=endpoint.token, max_retries=0)


def _ask(
    engine: RunningEngine, question: str, **kwargs: object
) -> openai.types.chat.ChatCompletion:
    return _client(engine).chat.completions.create(  # type: ignore[call-overload,no-any-return]
        model=EXTRACTIVE_MODEL_ID, messages=[{"role": "user", "content": question}], **kwargs
    )


def test_max_tokens_cuts_an_extractive_answer(api_engine: RunningEngine) -> None:
    whole = _ask(api_engine, "How much is the garden budget?")
    cut = _ask(api_engine, "How much is the garden budget?", max_tokens=3)
    assert whole.choices[0].finish_reason == "stop"
    assert cut.choices[0].finish_reason == "length"
    text = cut.choices[0].message.content or ""
    assert 0 < len(text) < len(whole.choices[0].message.content or "")
    assert "Sources:" not in text  # a cut answer is a fragment: no list after it
    assert cut.usage is not None and cut.usage.completion_tokens <= 3
    newer = _ask(api_engine, "How much is the garden budget?", max_completion_tokens=3)
    assert newer.choices[0].message.content == text


def test_stop_ends_the_text_streamed_or_whole(api_engine: RunningEngine) -> None:
    whole = _ask(api_engine, "How much is the garden budget?", stop=["euros"])
    text = whole.choices[0].message.content or ""
    assert "4,200" in text and "euros" not in text
    assert whole.choices[0].finish_reason == "stop"
    stream = _client(api_engine).chat.completions.create(
        model=EXTRACTIVE_MODEL_ID,
        messages=[{"role": "user", "content": "How much is the garden budget?"}],
        stop="euros",
        stream=True,
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert streamed == text


def test_usage_is_counted_and_sent_last_in_a_stream(api_engine: RunningEngine) -> None:
    whole = _ask(api_engine, "When is honey extracted?")
    assert whole.usage is not None
    assert whole.usage.prompt_tokens > 0 and whole.usage.completion_tokens > 0
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens
    chunks = list(
        _client(api_engine).chat.completions.create(
            model=EXTRACTIVE_MODEL_ID,
            messages=[{"role": "user", "content": "When is honey extracted?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.completion_tokens == whole.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_sources_are_listed_in_the_text_unless_turned_off(api_engine: RunningEngine) -> None:
    text = _ask(api_engine, "When is honey extracted?").choices[0].message.content or ""
    assert "\n\nSources:\n[1] bees.md" in text
    off = _ask(
        api_engine,
        "When is honey extracted?",
        extra_body={"ragdoll": {"sources_in_text": False}},
    )
    assert "Sources:" not in (off.choices[0].message.content or "")
    assert off.citations  # type: ignore[attr-defined]  # the extension field stays


def test_a_follow_up_in_messages_finds_what_it_refers_to(api_engine: RunningEngine) -> None:
    first = _ask(api_engine, "When is the honey extracted?").choices[0].message.content or ""
    messages = [
        {"role": "system", "content": "Answer from my notes."},
        {"role": "user", "content": "When is the honey extracted?"},
        {"role": "assistant", "content": first},  # with the sources list, as sent back
        {"role": "user", "content": "And where is it kept after that?"},
    ]
    follow = _client(api_engine).chat.completions.create(
        model=EXTRACTIVE_MODEL_ID,
        messages=messages,  # type: ignore[arg-type]
    )
    assert "cellar" in (follow.choices[0].message.content or "")
    assert follow.citations[0]["path"].endswith("bees.md")  # type: ignore[attr-defined]


def test_what_cannot_be_honoured_is_refused(api_engine: RunningEngine) -> None:
    with pytest.raises(openai.BadRequestError, match="n > 1"):
        _ask(api_engine, "When is honey extracted?", n=2)
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError, match="tool calls are not supported"):
        _ask(api_engine, "When is honey extracted?", tools=[tool], tool_choice="required")
    with pytest.raises(openai.BadRequestError, match="response_format"):
        _ask(api_engine, "When?", response_format={"type": "json_object"})
    # Plain tools (the model may choose not to call them) are accepted and ignored.
    plain = _ask(api_engine, "When is honey extracted?", tools=[tool])
    assert "August" in (plain.choices[0].message.content or "")


def test_an_unknown_endpoint_is_a_404_in_openais_shape(api_engine: RunningEngine) -> None:
    endpoint = api_engine.client.endpoint
    response = httpx.post(
        f"{endpoint.base_url}/v1/responses",
        headers={"Authorization": f"Bearer {endpoint.token}"},
        json={"model": "x", "input": "hi"},
    )
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and "/v1/responses" in error["message"]
    with pytest.raises(openai.NotFoundError):
        _client(api_engine).models.retrieve("no-such-model")


def test_legacy_completions(api_engine: RunningEngine) -> None:
    client = _client(api_engine)
    done = client.completions.create(model=EXTRACTIVE_MODEL_ID, prompt="When is honey extracted?")
    assert "August" in done.choices[0].text and done.usage is not None
    cut = client.completions.create(
        model=EXTRACTIVE_MODEL_ID, prompt="When is honey extracted?", max_tokens=2
    )
    assert cut.choices[0].finish_reason == "length"
    pieces = list(
        client.completions.create(
            model=EXTRACTIVE_MODEL_ID, prompt="When is honey extracted?", stream=True
        )
    )
    assert "August" in "".join(p.choices[0].text for p in pieces if p.choices)


def test_langchains_chat_openai_sees_limits_usage_and_sources(
    api_engine: RunningEngine,
) -> None:
    chat_openai = pytest.importorskip("langchain_openai").ChatOpenAI
    endpoint = api_engine.client.endpoint
    chat = chat_openai(
        base_url=f"{endpoint.base_url}/v1",
        api_key=endpoint.token,
        model=EXTRACTIVE_MODEL_ID,
        max_retries=0,
    )
    reply = chat.invoke("When is honey extracted?")
    assert "August" in reply.content and "Sources:\n[1] bees.md" in reply.content
    assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] > 0
    cut = chat.bind(max_tokens=2).invoke("When is honey extracted?")
    assert cut.response_metadata["finish_reason"] == "length"
    followed = chat.invoke(
        [
            ("user", "When is the honey extracted?"),
            ("assistant", reply.content),
            ("user", "And where is it kept after that?"),
        ]
    )
    assert "cellar" in followed.content
