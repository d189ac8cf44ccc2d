"""The multilingual embedder the window offers for a collection not in English, or for
questions asked in another language than English.

The bundled all-MiniLM-L6-v2 was trained on English: a German question over German
pages finds them by shared names and commands at best. multilingual-e5-small reads about
a hundred languages and a question in one about documents in another, at the size and
speed of a small English model (12 layers of 384, 118 M parameters: 471 MB of float32
safetensors as the hub lists them). It is offered, never fetched unasked: accepting
downloads it from the hub and switches the embedder, which re-embeds the collection in
the background (engine/rag/ingest/embedder_switch.py) while the current index answers.
Larger multilingual models (multilingual-e5-base, bge-m3) can be chosen as any folder.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.rag.ingest.embedder import DEFAULT_EMBEDDER, is_multilingual
from engine.rag.ingest.language import language_name, text_language
from engine.wire import EmbedderOffer

REPO_ID = "intfloat/multilingual-e5-small"
NAME = "multilingual-e5-small"
DOWNLOAD_BYTES = 471_000_000


def embedder_offer(
    *, languages: Sequence[str], embedder: str, asked: Sequence[str] = ()
) -> EmbedderOffer | None:
    """The offer for a collection in `languages` indexed by `embedder`, asked questions
    in `asked` (engine/service/question_languages.py); None when the embedder is
    multilingual, the collection's languages are unknown (nothing indexed yet), or the
    collection and the questions are all English."""
    other = [lang for lang in asked if lang != "en"]
    if not languages or is_multilingual(embedder):
        return None
    if all(lang == "en" for lang in languages) and not other:
        return None
    return EmbedderOffer(
        repo_id=REPO_ID,
        name=NAME,
        download_bytes=DOWNLOAD_BYTES,
        languages=list(languages),
        asked=other,
    )


def across_note(*, question: str, documents: Sequence[str], embedder: str) -> str | None:
    """What a refusal adds when `question` is surely in a language none of its
    `documents` (their languages) is written in and the embedder in force (`embedder`,
    the index's) is the bundled English-only one: why nothing was found, and the offer
    that would find it. None otherwise (another embedder's reach is not known by name)."""
    asked = text_language(question)
    if asked is None or not documents or asked in documents or embedder != DEFAULT_EMBEDDER:
        return None
    name = language_name(asked) or asked
    written = " and ".join(language_name(code) or code for code in documents[:2])
    return (
        f"Your question is in {name} and your documents in {written}: the bundled "
        "embedder reads English only, and finds pages in another language by the names "
        f"they share at best. Model… offers {NAME}, which reads both."
    )
