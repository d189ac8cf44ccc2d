"""The words the lexical scores compare (engine/rag/answer/content_words.py)."""

from __future__ import annotations

from engine.rag.answer.content_words import content_words, stem


def test_function_words_go_and_forms_meet_at_their_stem() -> None:
    assert content_words("How are the filters cleaned?") == ["filter", "clean"]
    assert stem("copies") == stem("copy") and stem("ignored") == stem("ignore")


def test_a_script_without_spaces_is_read_as_character_pairs() -> None:
    assert content_words("过滤器清洗") == ["过滤", "滤器", "器清", "清洗"]
