"""Telling a follow-up from a question that stands alone, in both directions."""

from __future__ import annotations

import math
from collections.abc import Callable

from engine.rag.answer.conversation import resolve
from engine.rag.answer.conversation_dependence import (
    COMMON_SHARE,
    MIN_COMMON_CHUNKS,
    looks_dependent,
    specific_in_collection,
)
from engine.wire import Turn


def _rare(*words: str) -> Callable[[str], bool]:
    """`specific` over a made-up collection in which only `words` are rare."""
    return lambda w: w.casefold() in words


def _every_word_rare(_: str) -> bool:
    return True


def test_a_pronoun_with_its_noun_in_the_question_stands_alone() -> None:
    for q in (
        "How do I stop APT from deleting the .deb files after installing them?",
        "Can a package get into testing before it is built on every release architecture?",
        "How do I move my topic branch so it looks forked from master instead of next?",
        "Which login methods should I avoid on Debian machines because they send passwords?",
        "In which order does bash apply its expansions?",
        "How do I refer to a job by a word from the middle of its command line?",
        "How do I list the installed packages and remove the ones I do not need?",
        # An "it" that stands for nothing.
        "Is it safe to remove old kernels from the boot partition?",
        "How long does it take for an upload to reach the mirrors?",
    ):
        assert not looks_dependent(q), q


def test_a_pronoun_nothing_in_the_question_can_stand_for_is_a_follow_up() -> None:
    # Even when every word is rare: what "it" is, only the earlier turn says.
    for q in (
        "How does pbuilder differ from it?",  # not its own clause's subject
        "When must the orig.tar.gz go with it?",
        "How does my script read from it and write to it?",
        "What does the initial non-native package it makes look like?",
        "Who writes its entries, and in what format?",  # "writes" is no noun
        "How is the format of its entries checked?",  # not the format's own
        "How are their symbols managed?",
        "Is it different from the plain upgrade?",
        "Can it be set to run once a day?",
    ):
        assert looks_dependent(q, specific=_every_word_rare), q


def test_phrases_that_point_back_are_follow_ups() -> None:
    for q in (
        "Which one should most packages use?",
        "How do I delete one element, or the whole thing?",
        "What other hooks delay code like that?",
        "What does debdiff do in that step?",
        "How do I decide whether my file should be a class or a package then?",
        "What should I use instead?",
        "And what does the second one do?",
        "What about POP3?",
    ):
        assert looks_dependent(q, specific=_every_word_rare), q
    # ... but not when the question says which one.
    assert not looks_dependent("Which one of the archive areas holds non-free software?")


def test_few_words_stand_alone_when_one_names_a_subject() -> None:
    # By shape: an option, a path, an identifier, a version, CamelCase, an acronym.
    for q in (
        "What does git rebase --onto do?",
        "What does declare -x do?",
        "What is dh_make used for?",
        "What goes into the debian/control file?",
        "What does AtEndOfPackage do?",
        "What is dselect in APT?",
    ):
        assert not looks_dependent(q), q
    # By the collection: a word few chunks hold.
    assert not looks_dependent("What is a coprocess in Bash?", specific=_rare("coprocess"))
    assert not looks_dependent("How do I start a git bisect?", specific=_rare("bisect"))
    # Common words name nothing: the question leans on the turn before.
    assert looks_dependent("What is a coprocess in bash?", specific=_rare())
    assert looks_dependent("Where do logs go?", specific=_rare())
    assert looks_dependent("When should I use one?", specific=_rare("one"))  # one is generic
    assert looks_dependent("What is a coprocess in bash?")  # no collection to ask
    # A capital inside the question is a name, however common the word.
    for q in ("Where are the Bash startup files?", "What are the archive areas of Debian?"):
        assert not looks_dependent(q, specific=_rare()), q
    assert looks_dependent("I wonder where logs go?", specific=_rare())  # "I" names nothing


def test_a_demonstrative_standing_for_a_thing_is_a_follow_up() -> None:
    for q in ("Is that the default?", "Can I make that a warning?", "Is that a good idea?"):
        assert looks_dependent(q, specific=_every_word_rare), q
    # "that" opening a clause after a noun is no stand-in.
    for q in (
        "How do I tell git bisect that a commit is good?",
        "How do I mark a bug that is real but will not be corrected?",
    ):
        assert not looks_dependent(q, specific=_every_word_rare), q


def test_a_demonstrative_before_a_noun_points_back() -> None:
    for q in (
        "That command, where does it save what I typed?",
        "Where is that setting kept?",
        "Can I put this option in a config file?",
    ):
        assert looks_dependent(q, specific=_every_word_rare), q
    for q in (
        # A clause, not a noun phrase: "that" after a verb that takes one.
        "How do I make sure that backups run every night?",
        # What it points to is an earlier clause of the question itself.
        "A debian-changes patch showed up after building; what does that usually mean?",
    ):
        assert not looks_dependent(q, specific=_every_word_rare), q


def test_a_pronoun_does_not_stand_for_the_noun_its_relative_clause_describes() -> None:
    # "a tool that makes it simpler": "it" is not the tool.
    assert looks_dependent("Is there a tool that makes it simpler?", specific=_every_word_rare)
    # A noun before the described one still can be what it stands for.
    assert not looks_dependent(
        "When a package has a bug that makes it crash, whom do I tell?",
        specific=_every_word_rare,
    )


def test_a_possessive_pronoun_stands_for_a_noun_said_before() -> None:
    assert looks_dependent("Why might mine be held back?", specific=_every_word_rare)
    assert looks_dependent("Is yours the same?", specific=_every_word_rare)
    # A noun before it in the question is what it stands for.
    assert not looks_dependent(
        "My upload was rejected while a friend's package was accepted; why was mine rejected?",
        specific=_every_word_rare,
    )


def test_a_comparison_or_an_addition_with_its_other_side_unsaid_is_a_follow_up() -> None:
    for q in ("How is fixup different?", "Do backslash escapes work too?", "Does it work as well?"):
        assert looks_dependent(q, specific=_every_word_rare), q
    assert not looks_dependent(
        "How is git rebase --onto different from a plain rebase?", specific=_every_word_rare
    )


def test_a_verb_phrase_left_out_is_a_follow_up() -> None:
    for q in ("What if I don't?", "Should I?", "Why can't I?"):
        assert looks_dependent(q, specific=_every_word_rare), q
    # A closing auxiliary after a noun is the question's own verb.
    for q in ("What does fakeroot do?", "What is it that dpkg-divert does?"):
        assert not looks_dependent(q, specific=_every_word_rare), q


def test_a_standalone_question_in_a_conversation_is_searched_as_asked() -> None:
    bash = Turn(question="How do I search the command history in bash?", answer="Press Ctrl-R.")
    asked = resolve(
        question="How do I start a git bisect?", history=(bash,), specific=_rare("bisect")
    )
    assert asked is not None and not asked.dependent and asked.query.startswith("How do I")
    vague = resolve(question="How do I start it?", history=(bash,), specific=_every_word_rare)
    assert vague is not None and vague.dependent and vague.context == bash.question


def test_a_word_is_specific_below_a_share_of_the_collection() -> None:
    asked: list[tuple[str, int]] = []
    counts = {"coprocess": 18, "bash": 512}

    def holding(word: str, cap: int) -> int | None:
        asked.append((word, cap))
        return min(counts.get(word, 0), cap) if word != "unknown" else None

    specific = specific_in_collection(holding=holding, chunks=lambda: 5703)
    cap = math.ceil(COMMON_SHARE * 5703)
    assert specific("Coprocess") and not specific("bash") and specific("zsh")
    assert not specific("unknown")  # no index to ask: common, as before
    assert specific("coprocess") and len(asked) == 4  # each word asked once
    assert {c for _, c in asked} == {cap}
    # A small collection: the floor, not the share.
    small = specific_in_collection(holding=lambda w, cap: 5, chunks=lambda: 40)
    assert small("anything") and MIN_COMMON_CHUNKS > 5
