"""What kind of fact a question asks for, and which sentences hold one."""

from __future__ import annotations

from engine.rag.answer.answer_type import Kind, asked_kinds, holds_asked


def test_where_and_which_file_ask_for_a_path_which_variable_for_a_variable() -> None:
    assert asked_kinds("Where does dpkg keep the checksums?") == (Kind.PATH,)
    assert asked_kinds("Which file tells dh_installman what to install?") == (Kind.PATH,)
    assert asked_kinds("Which variable lists the suffixes to skip?") == (Kind.VARIABLE,)
    assert asked_kinds("Which deborphan option finds dummy packages?") == (Kind.OPTION,)
    assert asked_kinds("Which command signs the .dsc file?") == (Kind.COMMAND,)
    assert asked_kinds("How do I plot one row of a matrix?") == ()


def test_a_path_url_or_file_name_counts_but_not_and_or() -> None:
    held = holds_asked(
        question="Where do security uploads go?",
        sentences=[
            "For security uploads, the place is ftp://ftp.security.upload.debian.org/pub/Queue/.",
            "It reads /etc/profile and ~/.profile, in that order.",
            "Settings go in gbp.conf of the user.",
            "Uploads are only accessible and/or visible to the team.",
        ],
    )
    assert held == [True, True, True, False]


def test_only_a_token_the_question_does_not_name_counts() -> None:
    # The sentence that repeats the question's own path states nothing new.
    held = holds_asked(
        question="Where is /etc/apt/sources.list read?",
        sentences=["The file /etc/apt/sources.list lists sources.", "It is read by apt-get."],
    )
    assert held == [False, False]
    held = holds_asked(
        question="Which variable lists file suffixes that completion skips?",
        sentences=["The shell variable FIGNORE is used to filter the matches.", "It skips."],
    )
    assert held == [True, False]


def test_a_command_is_a_command_line_not_any_hyphenated_word() -> None:
    held = holds_asked(
        question="Which command builds the packages without signing them?",
        sentences=[
            "Then you issue the following command: $ dpkg-buildpackage -us -uc",
            "A well-known tool builds the so-called binary packages.",
        ],
    )
    assert held == [True, False]


def test_a_question_that_asks_for_no_kind_lifts_nothing() -> None:
    held = holds_asked(question="How do I turn tabs into spaces?", sentences=["Use /usr/bin/x."])
    assert held == [False]
