"""Writes resources/common_words.json: the PER_LANGUAGE most frequent words of every
language wordfreq lists (42), without numbers. The full-text index leaves them out
(engine/rag/store/fulltext.py): in a collection of several languages, a question's
"wie", "der", "les" or "của" otherwise ranks every chunk of its own language above the
answer written in another."""

from __future__ import annotations

import json
from pathlib import Path

PER_LANGUAGE = 50
OUT = Path(__file__).resolve().parents[1] / "resources" / "common_words.json"


def main() -> None:
    import wordfreq

    words: set[str] = set()
    languages = sorted(wordfreq.available_languages(wordlist="best"))
    for language in languages:
        top = wordfreq.top_n_list(language, PER_LANGUAGE)
        words.update(w for w in top if not any(c.isdigit() for c in w))
    data = {"per_language": PER_LANGUAGE, "languages": languages, "words": sorted(words)}
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"{len(words)} words of {len(languages)} languages in {OUT}")


if __name__ == "__main__":
    main()
