"""Telling a follow-up from a question that stands alone, in both directions."""

from __future__ import annotations

from engine.rag.answer.conversation import resolve
from engine.rag.answer.conversation_dependence import looks_dependent
from engine.wire import Turn


def test_a_pronoun_with_its_noun_in_the_question_stands_alone() -> None:
    for q in (
        "How do I stop APT from deleting the .deb files after installing them?",
        "Can a package get into testing before it is built on every release architecture?",
        "How do I move my topic branch so it looks forked from master instead of next?",
        "Which login methods should I avoid on Debian machines because they send passwords?",
        "How do I list the installed packages and remove the ones I do not need?",
        # An "it" that stands for nothing.
        "Is it safe to remove old kernels from the boot partition?",
        "How long does it take for an upload to reach the mirrors?",
    ):
        assert not looks_dependent(q), q


def test_a_pronoun_nothing_in_the_question_can_stand_for_is_a_follow_up() -> None:
    # What "it" is, only the earlier turn says.
    for q in (
        "How does pbuilder differ from it?",  # not its own clause's subject
        "When must the orig.tar.gz go with it?",
        "How does my script read from it and write to it?",
        "What does the initial non-native package it makes look like?",
        "Is it different from the plain upgrade?",
        "Can it be set to run once a day?",
        "Where was he studying at the time?",
    ):
        assert looks_dependent(q), q


def test_a_stand_in_for_a_noun_is_a_follow_up() -> None:
    for q in (
        "Which one should most packages use?",
        "How do I delete one element, or the whole thing?",
        "And what does the second one do?",
    ):
        assert looks_dependent(q), q
    # ... but not when the question says which one.
    assert not looks_dependent("Which one of the archive areas holds non-free software?")


def test_a_pronoun_does_not_stand_for_the_noun_its_relative_clause_describes() -> None:
    # "a tool that makes it simpler": "it" is not the tool.
    assert looks_dependent("Is there a tool that makes it simpler?")
    # A noun before the described one still can be what it stands for.
    assert not looks_dependent("When a package has a bug that makes it crash, whom do I tell?")


def test_a_comparison_or_an_addition_with_its_other_side_unsaid_is_a_follow_up() -> None:
    for q in (
        "How is fixup different?",
        "Do backslash escapes work too?",
        "How do I decide whether my file should be a class or a package then?",
        "What should I use instead?",
    ):
        assert looks_dependent(q), q
    assert not looks_dependent("How is git rebase --onto different from a plain rebase?")


def test_what_the_blind_set_showed_no_rule_for_is_left_to_the_search() -> None:
    # Openers, demonstratives, possessives, few words, a verb phrase left out, and
    # every other language: judged standalone, searched as asked and hedged by `lean`.
    for q in (
        "What about POP3?",
        "Is that the default?",
        "Why might mine be held back?",
        "What if I don't?",
        "Where do logs go?",
        "Und wie mache ich das wieder rückgängig?",
        "Et pour le clavier ?",
        "¿Cómo lo inicializo la primera vez?",
    ):
        assert not looks_dependent(q), q


def test_a_standalone_question_in_a_conversation_is_searched_as_asked() -> None:
    bash = Turn(question="How do I search the command history in bash?", answer="Press Ctrl-R.")
    asked = resolve(question="How do I start a git bisect?", history=(bash,))
    assert asked is not None and not asked.dependent and asked.query.startswith("How do I")
    assert asked.hedged and asked.also[0].blend  # the history-aware search, fused by `lean`
    vague = resolve(question="How do I start it?", history=(bash,))
    assert vague is not None and vague.dependent and vague.context == bash.question
