"""The model-server answerer: the prompt keeps the executor's stable layout as chat
messages (so the server's prefix cache serves a follow-up), fits the server's
context, and streams the answer with the latency noted."""

from __future__ import annotations

from engine.rag.answer.passages import Passage
from engine.rag.answer.remote import EstimatingTokenizer, RemoteAnswerer
from engine.rag.answer.server_client import ServerEndpoint
from engine.wire_events import Citation, Turn
from tests.support.model_server_stub import ANSWER, model_server_stub

HONEY = Passage(
    index=1, text="The honey is extracted in late August.", path="/n/bees.md", page=None
)
HIVES = Passage(index=1, text="The hives are inspected on Saturdays.", path="/n/hives.md", page=2)


def _citation(p: Passage) -> Citation:
    return Citation(
        index=p.index,
        chunk_id="c1",
        path=p.path,
        page=p.page,
        text=p.text,
        score=0.9,
        char_start=0,
        char_end=len(p.text),
    )


def test_a_follow_up_starts_with_the_first_turn_as_it_was_sent() -> None:
    answerer = RemoteAnswerer(endpoint=ServerEndpoint(url="http://127.0.0.1:1", model="m"))
    first = answerer.prompt_request(question="When is the honey extracted?", passages=[HONEY])
    turn = Turn(
        question="When is the honey extracted?",
        answer="In late August [1].",
        citations=[_citation(HONEY)],
    )
    follow = answerer.prompt_request(question="And the hives?", passages=[HIVES], history=[turn])
    roles = [m["role"] for m in follow.messages]
    assert roles == ["system", "user", "assistant", "user"]
    # system + the first question as sent: the prefix the server has cached.
    assert follow.messages[:2] == first.messages
    assert follow.messages[2]["content"] == "In late August [1]."
    assert "Saturdays" in follow.messages[3]["content"]
    assert follow.messages[3]["content"].endswith("Question: And the hives?")


def test_sources_are_cut_to_the_servers_context() -> None:
    long = Passage(index=1, text="word " * 20000, path="/n/long.md", page=None)
    answerer = RemoteAnswerer(
        endpoint=ServerEndpoint(url="http://127.0.0.1:1", model="m"), context_length=1024
    )
    request = answerer.prompt_request(question="What?", passages=[long], max_new_tokens=128)
    counter = EstimatingTokenizer()
    text = counter.apply_chat_template(list(request.messages))
    assert len(counter(text)["input_ids"]) <= 1024 - 128
    assert request.max_new_tokens == 128


def test_the_estimate_decodes_what_it_encoded() -> None:
    tokenizer = EstimatingTokenizer()
    text = "Übersetzung: ünïcode, and `code_like(x)`  spaces."
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert len(ids) >= len(text) // 3  # never fewer tokens than a BPE would count


def test_stream_answers_and_notes_latency_and_cache() -> None:
    with model_server_stub() as stub:
        answerer = RemoteAnswerer(endpoint=ServerEndpoint(url=stub.url, model="stub-model"))
        assert answerer.first_token_ms() is None
        text = "".join(answerer.stream(question="When?", passages=[HONEY]))
    assert text == ANSWER
    assert answerer.first_token_ms() is not None
    assert answerer.last_cached_tokens == 300
    assert answerer.last_generation is not None
    assert answerer.last_generation.prompt_tokens == 321
