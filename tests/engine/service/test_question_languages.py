"""engine/service/question_languages.py: the languages questions are asked in, where the
identifier is sure, most asked first."""

from __future__ import annotations

from engine.service.question_languages import QuestionLanguages


def test_the_languages_heard_most_asked_first() -> None:
    heard = QuestionLanguages()
    assert heard.heard() == []
    heard.note("Wie sorge ich dafür, dass Sicherheitsupdates automatisch installiert werden?")
    heard.note("Comment installer automatiquement les mises à jour de sécurité ?")
    heard.note("Welche Pakete sind auf diesem Rechner installiert?")
    heard.note("ok?")  # too short to tell: not counted
    assert heard.heard() == ["de", "fr"]
