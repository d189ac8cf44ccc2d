"""Soft history (engine/rag/answer/conversation.py `lean`, engine/rag/pipeline/adapters.py): a
question the follow-up detector judges standalone is searched as asked and history-aware,
the history's rankings fused in by how much the earlier question helps its search. On
real text (passages of the Debian Reference, the New Maintainers' Guide and Debian
Policy, as the benchmark's index holds them), with the MiniLM embedder and LanceStore."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from engine.rag.answer.conversation import looks_dependent, resolve
from engine.rag.ingest.embedder import Embedder
from engine.rag.pipeline.adapters import store_retrieve_batch
from engine.rag.pipeline.requests import new_question
from engine.rag.store.fulltext import cut_words
from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import embedded_text
from engine.wire import Citation, Turn

# (file, page, section, text): excerpts of the real manuals, one chunk each.
PASSAGES = (
    (
        "debian-reference.pdf",
        157,
        "8.1 The locale",
        "They are internationalized by making them handle UTF-8 data and localized by "
        "providing their translated messages through the gettext(1) infrastructure. "
        "Translated messages may be provided as separate localization packages. The current "
        "Debian desktop GUI system normally sets the locale under GUI environment as "
        "”LANG=xx_YY.UTF-8”. Here, ”xx” is ISO 639 language codes and ”YY” is ISO 3166 "
        "country codes. These values are set by the desktop configuration GUI dialogue and "
        "change the program behavior. See Section 1.5.2 8.1.1 Rationale for UTF-8 locale The "
        "simplest representation of the text data is ASCII which is sufficient for English "
        "and uses less than 127 characters (representable with 7 bits).",
    ),
    (
        "debian-reference.pdf",
        158,
        "8.1.1 Rationale for UTF-8 locale",
        "In order to support more characters, many character sets and encoding systems have "
        "been used to support many languages (see Table 11.2). Unicode character set can "
        "represent practically all characters known to human with 21 bit code point range "
        "(i.e., 0 to 10FFFF in hexadecimal notation). Text encoding system UTF-8 fits Unicode"
        " code points into a sensible 8 bit data stream mostly compatible with the ASCII data"
        " processing system. This makes UTF-8 the modern preferred choice. UTF stands for "
        "Unicode Transformation Format. When ASCII plain text data is converted to UTF-8 one,"
        " it has exactly the same content and size as the original ASCII one. So you loose "
        "nothing by deploying UTF-8 locale. Under UTF-8 locale with the compatible "
        "application program, you can display and edit any foreign language text data as long"
        " as required fonts and input methods are installed and enabled.",
    ),
    (
        "debian-reference.pdf",
        158,
        "8.1.2 The reconfiguration of the locale",
        "You need to configure it as: # dpkg-reconfigure locales This process involves 2 "
        "steps. 1. Select all required locale data to be compiled into the binary form. "
        "(Please make sure to include at least one UTF-8 locale) 2. Set the system wide "
        "default locale value by creating ”/etc/default/locale” for use by PAM (see Section "
        "4.5). The system wide default locale value set in ”/etc/default/locale” may be "
        "overridden by the GUI configuration for GUI applications. Note Actual traditional "
        "encoding system can be identified by ”/usr/share/i18n/SUPPORTED”. Thus, the "
        "”LANG=en_US” is ”LANG=en_US.ISO-8859-1”.",
    ),
    (
        "maint-guide.pdf",
        56,
        "8.5 UTF-8 conversion",
        "You need to do the other tasks described in Section 8.3, too. 8.5 UTF-8 conversion "
        "If upstream documents are encoded in old encoding schemes, converting them to UTF-8 "
        "is a good idea. • Use iconv(1) to convert encodings of plain text files. iconv -f "
        "latin1 -t utf8 foo_in.txt > foo_out.txt • Use w3m(1) to convert from HTML files to "
        "UTF-8 plain text files. When you do this, make sure to execute it under UTF-8 "
        "locale. LC_ALL=en_US.UTF-8 w3m -o display_charset=UTF-8 \\",
    ),
    (
        "debian-policy.pdf",
        121,
        "12.1 Manual pages",
        "use either UTF-8 or the usual legacy encoding for that language (normally the one "
        "corresponding to the shortest relevant locale name in /usr/share/i18n/ SUPPORTED). "
        "For example, pages under /usr/share/man/fr should use either UTF-8 or ISO-8859-1.3 A"
        " country name (the DE in de_DE) should not be included in the subdirectory name "
        "unless it indicates a significant difference in the language, as this excludes "
        "speakers of the language in other countries.4 If a localized version of a manual "
        "page is provided, it should either be up-to-date or it should be obvious to the "
        "reader that it is outdated and the original manual page should be used instead. This"
        " can be done either by a note at the beginning of the manual page or by showing the "
        "missing or changed portions in the original language instead of the target language.",
    ),
    (
        "debian-reference.pdf",
        194,
        "9.8.5 Splitting a large file into small files",
        "undelete files on the ext2 filesystem using list_deleted_inodes and undel commands "
        "of debugfs(8) in the e2fsprogs package. 9.8.5 Splitting a large file into small "
        "files When a data is too big to backup as a single file, you can backup its content "
        "after splitting it into, e.g. 2000MiB chunks and merge those chunks back into the "
        "original file later. $ split -b 2000m large_file $ cat x* >large_file Caution Please"
        " make sure you do not have any files starting with ”x” to avoid name crashes. 9.8.6 "
        "Clearing file contents In order to clear the contents of a file such as a log file, "
        "do not use rm(1) to delete the file and then create a new empty file, because the "
        "file may still be accessed in the interval between commands.",
    ),
    (
        "debian-reference.pdf",
        192,
        "9.7.7 Writing directly to the CD/DVD-R/RW",
        "# dd if=/dev/cdrom bs=2048 count=23150592 conv=notrunc,noerror | md5sum # dd "
        "if=/dev/cdrom bs=2048 count=23150592 conv=notrunc,noerror > cd.iso Warning You must "
        "carefully avoid ISO9660 filesystem read ahead bug of Linux as above to get the right"
        " result. 9.7.7 Writing directly to the CD/DVD-R/RW Tip DVD is only a large CD to "
        "wodim(1) provided by cdrkit. You can find a usable device by the following. # wodim "
        "--devices Then the blank CD-R is inserted to the CD drive, and the ISO9660 image "
        "file, ”cd.iso” is written to this device, e.g., ”/dev/hda”, using wodim(1) by the "
        "following.",
    ),
    (
        "debian-reference.pdf",
        189,
        "9.7.3 Mounting the disk image file",
        "can be written to an unmounted partition, e.g., the first partition of the second "
        "SCSI drive ”/dev/sdb1” with matching size, by the following. # dd if=partition.img "
        "of=/dev/sdb1 9.7.3 Mounting the disk image file The disk image ”partition.img” "
        "containing a single partition image can be mounted and unmounted by using the loop "
        "device as follows. # losetup -v -f partition.img Loop device is /dev/loop0 # mkdir "
        "-p /mnt/loop0 # mount -t auto /dev/loop0 /mnt/loop0 ...hack...hack...hack # umount "
        "/dev/loop0 # losetup -d /dev/loop0 This can be simplified as follows.",
    ),
)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[LanceStore]:
    folder: Path = tmp_path_factory.mktemp("soft") / "index"
    store = LanceStore(folder=folder, background=False)
    store.ensure_embedder(embedder_id=embedder.info.id, dimension=embedder.info.dimension)
    vectors = embedder.embed(
        [embedded_text(section=section, text=text) for _, _, section, text in PASSAGES]
    )
    store.chunks.add(
        pa.Table.from_pylist(
            [
                {
                    "chunk_id": f"{file}:{page}:{i}", "doc_id": file, "path": f"/d/{file}",
                    "ordinal": i, "page": page, "char_start": 0, "char_end": len(text),
                    "text": text, "text_hash": f"h{i}", "vector": v.tolist(), "ext": ".pdf",
                    "section": section, "words": cut_words(text),
                }
                for i, ((file, page, section, text), v) in enumerate(
                    zip(PASSAGES, vectors, strict=True)
                )
            ]
        )
    )  # fmt: skip
    yield store
    store.close()


def _turn(question: str, file: str, page: int) -> Turn:
    cite = Citation(
        index=1, chunk_id="c1", path=f"/d/{file}", page=page, text="passage", score=0.6,
        char_start=0, char_end=1,
    )  # fmt: skip
    return Turn(question=question, answer="As the manual says [1].", citations=[cite])


LOCALE = _turn("How do I change the locale on a Debian system?", "debian-reference.pdf", 158)


def _search(store: LanceStore, embedder: Embedder, question: str, history: tuple[Turn, ...]):  # type: ignore[no-untyped-def]
    follow = resolve(question=question, history=history) if history else None
    asked = new_question(text=follow.query if follow else question, k=3, conversation=follow)
    (result,) = store_retrieve_batch(store=store, embed=embedder.embed)([asked])
    return result


def test_a_follow_up_the_detector_misses_still_finds_the_earlier_topic(
    store: LanceStore, embedder: Embedder
) -> None:
    question = "Why UTF-8?"
    assert not looks_dependent(question)  # names its subject: judged standalone
    alone = _search(store, embedder, question, ())
    within = _search(store, embedder, question, (LOCALE,))
    # Alone, the New Maintainers' Guide's "UTF-8 conversion" is among the top 3; after
    # the locale question the earlier turn's manual holds all three, the page its
    # answer cited among them.
    assert any(h.chunk.path != "/d/debian-reference.pdf" for h in alone.hits)
    assert alone.leaned == 0.0
    assert within.leaned > 0.0
    # Its results are not its own search's: the window says what was searched.
    assert within.history_changed and not alone.history_changed
    assert all(h.chunk.path == "/d/debian-reference.pdf" for h in within.hits)
    assert within.hits[0].chunk.section == "8.1.1 Rationale for UTF-8 locale"
    # The page its answer cited (p. 158, with the locale's reconfiguration) first, the
    # section's first page beside it: distinct pages, not p. 158's second chunk.
    assert [h.chunk.page for h in within.hits[:2]] == [158, 157]


def test_a_topic_switch_keeps_its_own_results(store: LanceStore, embedder: Embedder) -> None:
    question = "How do I split a large file into smaller pieces?"
    alone = _search(store, embedder, question, ())
    within = _search(store, embedder, question, (LOCALE,))
    # The locale question does not help this search: it is ranked as if asked alone.
    assert within.leaned == 0.0
    assert not within.history_changed  # nothing to say: no "searched for" line
    assert [h.chunk.chunk_id for h in within.hits] == [h.chunk.chunk_id for h in alone.hits]
    assert within.hits[0].chunk.section == "9.8.5 Splitting a large file into small files"
