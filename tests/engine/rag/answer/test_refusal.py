"""Which question words count as never mentioned, and the bar they raise."""

from __future__ import annotations

from engine.rag.answer.refusal import (
    SPREAD,
    UNKNOWN_WORD_PENALTY,
    another_form,
    capitalises_nouns,
    held,
    names,
    refused,
    unknown_words,
)

PASSAGES = [
    "PostgreSQL and MySQL servers are packaged for Debian.",
    "The database listens on a local socket by default.",
]


def test_only_words_in_no_passage_and_no_chunk_are_unknown() -> None:
    asked: list[str] = []

    def holds(word: str) -> bool:
        asked.append(word)
        return word in ("set", "replicas")  # chunks outside the passages have them

    unknown = unknown_words(
        question="How do I set up replication slots and replicas in PostgreSQL servers?",
        texts=PASSAGES,
        holds=holds,
    )
    assert unknown == ["replication", "slots"]
    # Words the passages hold ("postgresql", "server" via its stem) are not looked up,
    # nor function words a full-text index drops ("how", "and", "in").
    assert asked == ["set", "replication", "slots", "replicas"]


def test_an_unknown_word_raises_the_bar_by_the_penalty() -> None:
    assert not refused(score=0.6, unknown=[], min_score=0.5)
    assert refused(score=0.6, unknown=["wireguard"], min_score=0.5)
    assert not refused(score=0.5 + UNKNOWN_WORD_PENALTY + 0.01, unknown=["vpn"], min_score=0.5)
    assert refused(score=0.4, unknown=[], min_score=0.5)


def test_a_name_no_chunk_holds_is_unknown_though_each_of_its_words_is_known() -> None:
    asked: list[str] = []

    def holds_phrase(phrase: str) -> bool:
        asked.append(phrase)
        return phrase == "Debian Policy"  # a chunk outside the passages has it

    unknown = unknown_words(
        question="How do I submit a package to the Arch User Repository per Debian Policy?",
        texts=["Upload the package to the archive: the arch and user fields of its repository."],
        holds=lambda word: True,
        holds_phrase=holds_phrase,
    )
    assert unknown == ["Arch User Repository"]
    assert asked == ["Arch User Repository", "Debian Policy"]


def test_a_name_the_passages_hold_is_not_looked_up() -> None:
    def holds_phrase(phrase: str) -> bool:
        raise AssertionError(f"looked up {phrase}")

    assert not unknown_words(
        question="Where does Git Buildpackage keep its settings?",
        texts=["The git-buildpackage\nsettings live in ~/.gbp.conf."],
        holds=lambda word: True,
        holds_phrase=holds_phrase,
    )


def test_names_are_runs_of_capitalised_words_not_the_first_word_nor_code() -> None:
    assert names("Does Secure Boot work with the LaTeX Beamer class?") == [
        "Secure Boot",
        "LaTeX Beamer",
    ]
    assert names("Secure the Raspberry Pi") == ["Raspberry Pi"]
    # A sentence's end is no name's middle, whatever the language capitalises.
    assert names("Ich verwende Stable. Wie wechsle ich zu Testing?") == []
    assert names("Is it in Debian Policy. Or in Node.js Express?") == [
        "Debian Policy",
        "Node.js Express",
    ]
    # All capitals are SQL or an acronym, one capitalised word is no name of several.
    assert names("Does a BIGINT PRIMARY KEY column alias the rowid in SQLite?") == []
    assert names("What is the IPv4 MTU of Debian?") == []
    # Every sentence starts with a capital, not only the question's first.
    assert names("Sistem hang total. Setelah Alt-SysRq, tombol apa?") == []
    assert names("It hangs. Secure Boot is on and Raspberry Pi OS stops.") == ["Raspberry Pi"]


def test_a_language_that_capitalises_its_nouns_names_nothing_by_them() -> None:
    german = {"paket", "probleme", "warnung", "name", "editor"}

    def ordinary(word: str) -> bool:
        return word in german

    assert names("Wieso macht das Paket soul unter LuaLaTeX Probleme?", ordinary=ordinary) == []
    assert names("Woher kommt der Name Debian?", ordinary=ordinary) == []
    # A name's own words stay one: what the asker's language does not use.
    assert names(
        "Zeigt der Editor Visual Studio Code die Warnung Underfull?", ordinary=ordinary
    ) == ["Visual Studio Code"]
    assert capitalises_nouns("de")
    assert not capitalises_nouns("en")
    assert not capitalises_nouns(None)


def test_a_german_question_s_capitalised_nouns_are_no_unknown_name() -> None:
    question = "Wieso macht das Paket soul unter LuaLaTeX Probleme?"
    asked: list[str] = []

    def holds_phrase(phrase: str) -> bool:
        asked.append(phrase)
        return False

    unknown = unknown_words(
        question=question,
        texts=["Das Paket soul arbeitet unter LuaLaTeX nicht wie erwartet."],
        holds=lambda word: True,
        holds_phrase=holds_phrase,
        ordinary=lambda word, language: language == "de" and word == "probleme",
    )
    assert unknown == []
    assert asked == []
    # Read as English capitals, the same words were one name never mentioned.
    assert unknown_words(
        question=question,
        texts=["Das Paket soul arbeitet unter LuaLaTeX nicht wie erwartet."],
        holds=lambda word: True,
        holds_phrase=holds_phrase,
    ) == ["LuaLaTeX Probleme"]


def test_negated_auxiliaries_and_pronouns_are_never_unknown() -> None:
    asked: list[str] = []

    def holds(word: str) -> bool:
        asked.append(word)
        return False  # an index that keeps "isn't" whole holds no "isn"

    for question in (
        "What if the machine isn't on all day?",
        "And for packages I haven’t installed, why won't mine upgrade?",
    ):
        unknown = unknown_words(question=question, texts=PASSAGES, holds=holds)
        assert not {"isn", "haven", "won", "mine", "t"} & set(unknown), unknown
    # The words around them are still looked up.
    assert "machine" in asked and "upgrade" in asked


def test_the_gate_refuses_nothing_for_lack_of_english_words() -> None:
    """A German or Spanish question's ordinary words, inflected or compounded otherwise
    than in the passages, are not "never mentioned" (no word list of the language is
    needed); a word no passage holds in any form still is."""
    passages = [
        "Die Sicherheit des Systems hängt an regelmäßigen Updates.",
        "Pakete lassen sich mit cron-apt automatisch installieren.",
        "Puedes configurar el paquete antes de empaquetar la aplicación.",
    ]
    unknown = unknown_words(
        question="Wie sorge ich dafür, dass Sicherheitsupdates automatisch installiert werden?",
        texts=passages,
        holds=lambda word: word in ("sorge", "dafür", "dass", "werden", "wie", "ich"),
    )
    assert unknown == []
    assert not refused(score=0.6, unknown=unknown, min_score=0.5)
    spanish = unknown_words(
        question="¿Cómo configuro y empaqueta una aplicación con pybuild?",
        texts=passages,
        holds=lambda word: word in ("cómo", "una", "con"),
    )
    assert spanish == ["pybuild"]


def test_a_word_the_collection_holds_in_another_form_is_not_unknown() -> None:
    """A collection indexed with English rules stems no Spanish verb: the full-text
    index is asked for a word sharing all but the last letters ("borro" / "borrar")."""
    asked: list[tuple[str, int]] = []
    collection = {"borrar", "comprueba", "python"}

    def holds_form(word: str, fixed: int) -> bool:
        asked.append((word, fixed))
        return any(w[:fixed] == word[:fixed] and abs(len(w) - len(word)) <= 2 for w in collection)

    unknown = unknown_words(
        question="¿Cómo borro y compruebo un módulo de pybuild?",
        texts=PASSAGES,
        holds=lambda word: False,
        holds_form=holds_form,
    )
    assert unknown == ["cómo", "módulo", "pybuild"]
    # All but the last letter fixed.
    assert ("borro", 4) in asked and ("compruebo", 8) in asked and ("pybuild", 6) in asked
    # A word of four letters is too short to tell another form from another word.
    assert all(len(word) > 4 for word, _ in asked)


def test_another_form_is_an_inflection_or_a_compound_of_known_words() -> None:
    words = {"sicherheit", "updates", "installieren", "configurar", "slot", "paket"}
    assert another_form("installiert", words)
    assert another_form("configuro", words)
    assert another_form("sicherheitsupdates", words)
    # Too short to tell an inflection from another word; unrelated words stay unknown.
    assert not another_form("slots", words)
    assert not another_form("paketverwaltung", words)
    assert not another_form("docker", words)


def test_a_word_with_a_prefix_or_an_infix_is_another_form() -> None:
    # Languages whose forms change at the front: a negation, an aspect prefix, an infix.
    assert another_form("nenastavím", {"nastaví"})
    assert another_form("унаследован", {"пронаследован"})
    assert another_form("mengonfigurasinya", {"mengkonfigurasinya"})
    # A compound whose longer part the passages hold.
    assert another_form("släktdatabasen", {"databasen", "släkten"})
    # Shared letters that are not most of the word, or too few, tell nothing.
    assert not another_form("docker", {"dockerfile"})
    assert not another_form("kubernetes", {"kubectl", "netes"})
    assert not another_form("zeichnungsrahmen", {"zeichnen", "rahmens"})


def test_a_run_of_chinese_or_japanese_is_no_unknown_word() -> None:
    # Without spaces a run of Han or kana is a phrase ("如何更新软件包列表"), which no
    # chunk holds whole: read as a word, it refused every question of such a collection.
    unknown = unknown_words(
        question="如何用 WireGuard 更新软件包列表？",
        texts=["更新软件包列表用 apt update。"],
        holds=lambda w: False,
    )
    assert unknown == ["wireguard"]


def test_a_word_held_only_by_another_few_documents_is_not_held_for_this_answer() -> None:
    """ "Docker" in one chapter of another manual says nothing about the documents the
    answer comes from; a word several documents use is the collection's own."""
    answering = frozenset({"/docs/faq-de.html"})
    assert held(frozenset({"/docs/faq-de.html", "/docs/ref.pdf"}), answering=answering)
    assert not held(frozenset({"/docs/ref.pdf"}), answering=answering)
    assert not held(frozenset(), answering=answering)
    spread = frozenset(f"/docs/{i}.pdf" for i in range(SPREAD))
    assert held(spread, answering=answering)
    assert held(None, answering=answering)  # not known to be absent


def test_a_term_with_a_korean_particle_is_read_as_the_term() -> None:
    """ "XCF로" ('as XCF'): the particle follows the term without a space."""
    held_words = {"xcf", "저장하면"}
    unknown = unknown_words(
        question="XCF로 저장하면 WireGuard를?",
        texts=["다른 내용"],
        holds=held_words.__contains__,
    )
    assert unknown == ["wireguard"]


def test_ordinary_is_asked_with_the_questions_language() -> None:
    """An inflection is looked for among the words of the language the question is
    written in (word_languages.py, `inflects_own`); a question too short to tell asks
    with None."""
    asked: list[tuple[str, str | None]] = []

    def ordinary(word: str, language: str | None) -> bool:
        asked.append((word, language))
        return word == "impedisco"

    italian = "Come impedisco che il documento venga stampato con il nftables del sistema?"
    unknown = unknown_words(
        question=italian, texts=PASSAGES, holds=lambda word: False, ordinary=ordinary
    )
    assert "impedisco" not in unknown and "nftables" in unknown
    assert ("impedisco", "it") in asked and ("nftables", "it") in asked
