from __future__ import annotations

from pathlib import Path

import pytest

from engine.rag.ingest.formats import mail
from engine.rag.ingest.parsers import parse_file
from tests.engine.rag.ingest.formats.documents import write_eml, write_mbox
from tests.engine.rag.ingest.formats.helpers import reason


def test_eml_headers_plain_body_and_attachment_names(tmp_path: Path) -> None:
    doc = parse_file(path=write_eml(path=tmp_path / "invoice.eml"))
    assert doc.page_count is None
    assert doc.pages[0].text == (
        "Subject: Rechnung Nr. 2024-117 für März\n"
        "From: Billing <billing@example.com>\n"
        "To: Ada <ada@example.com>\n"
        "Date: Tue, 01 Oct 2024 10:00:00 +0200\n"
        "Attachments: invoice-117.pdf\n\n"
        "Hello Ada,\n\nThe invoice total is 1,284 euros, payable within 30 days.\n\nRegards"
    )


def test_eml_html_only_body_encoded_headers_and_unknown_charset(tmp_path: Path) -> None:
    (tmp_path / "news.eml").write_bytes(
        b"From: =?utf-8?q?J=C3=BCrgen?= <j@example.com>\r\n"
        b"Subject: =?iso-8859-1?q?Gr=FC=DFe?=\r\n"
        b"MIME-Version: 1.0\r\n"
        b"Content-Type: text/html; charset=x-unknown-charset\r\n"
        b"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
        b"<html><head><style>p{}</style></head><body><h1>News</h1>"
        b"<p>Caf=C3=A9 opens at 8.</p></body></html>\r\n"
    )
    assert parse_file(path=tmp_path / "news.eml").pages[0].text == (
        "Subject: Grüße\nFrom: Jürgen <j@example.com>\n\nNews\n\nCafé opens at 8."
    )


def test_eml_reasons(tmp_path: Path) -> None:
    (tmp_path / "scan.eml").write_bytes(b"%PDF-1.7\n" + bytes(range(256)))
    assert reason(tmp_path / "scan.eml") == "not an e-mail message (binary content)"
    (tmp_path / "note.eml").write_text("just some words\nwithout any headers\n")
    assert reason(tmp_path / "note.eml") == (
        "not an e-mail message (no From, To, Subject or Date header)"
    )


def test_mbox_one_page_per_message_with_from_escapes_undone(tmp_path: Path) -> None:
    doc = parse_file(path=write_mbox(path=tmp_path / "office.mbox"))
    assert doc.page_count == 3
    assert [page.text.split("\n")[0] for page in doc.pages] == [
        "Subject: Lunch on Friday",
        "Subject: Security notice",
        "Subject: Holiday party",
    ]
    assert doc.pages[0].text.endswith("noodle place?\nFrom what I hear it is good.")
    assert "server room door code changed to 4417" in doc.pages[1].text


def test_huge_mailbox_is_cut_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mail, "MAX_MAILBOX_CHARS", 400)
    doc = parse_file(path=write_mbox(path=tmp_path / "office.mbox"))
    assert doc.page_count == 2
    assert doc.notes == ("only the first 2 messages were read (limit: 400 characters of text)",)
    assert doc.pages[-1].text.endswith(f"[{doc.notes[0]}]")


def test_mbox_reasons(tmp_path: Path) -> None:
    (tmp_path / "inbox.mbox").write_text("Subject: not an mbox\n\nhello\n")
    assert reason(tmp_path / "inbox.mbox") == (
        'not an mbox mailbox (it does not start with a "From " line)'
    )
    (tmp_path / "empty.mbox").write_bytes(b"")
    assert reason(tmp_path / "empty.mbox") == "empty file"
    assert "not found" in reason(tmp_path / "gone.mbox")
