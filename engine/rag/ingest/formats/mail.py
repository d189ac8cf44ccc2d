"""E-mail: one .eml message (a non-paged document), or an .mbox mailbox read
as a stream, one page per message (page = the message's position).

A message reads as its headers (Subject, From, To, Cc, Date), the names of its
attachments, and its body: the text/plain part, or the HTML part as text.
"""

from __future__ import annotations

import email.message
import logging
from collections.abc import Iterator
from email import policy
from email.parser import BytesParser
from pathlib import Path
from typing import BinaryIO

from engine.errors import ParseError
from engine.rag.ingest.formats.base import ParsedDocument, numbered_pages, one_line, single_page
from engine.rag.ingest.formats.html_page import html_to_text
from engine.rag.ingest.safe_open import open_listed
from engine.rag.ingest.text_cleanup import (
    BinaryContentError,
    decode_text_bytes,
    normalize_plain_text,
)

log = logging.getLogger(__name__)

_HEADERS = ("Subject", "From", "To", "Cc", "Date")
# A message needs one of these to be a message at all.
_IDENTIFYING = ("From", "To", "Subject", "Date", "Message-ID", "Received")
_BINARY_START = (b"%PDF-", b"PK\x03\x04", b"\xd0\xcf\x11\xe0", b"\x89PNG", b"\x1f\x8b")
# Mailboxes can be gigabytes; their text is kept up to this many characters.
MAX_MAILBOX_CHARS = 64 * 1024 * 1024
# One message larger than this (huge attachments) is read only this far.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_MAX_LINE_BYTES = 1024 * 1024


def parse_eml(*, path: Path, data: bytes) -> ParsedDocument:
    if data.lstrip().startswith(_BINARY_START) or b"\x00" in data[:4096]:
        raise ParseError("not an e-mail message (binary content)")
    message = _parse_message(data=data)
    if not any(key in message for key in _IDENTIFYING):
        raise ParseError("not an e-mail message (no From, To, Subject or Date header)")
    return single_page(path=path, text=normalize_plain_text(text=message_text(message=message)))


def parse_mbox(*, path: Path) -> ParsedDocument:
    """Read the mailbox from disk message by message: it is never held whole.
    (The standard library's mailbox.mbox opens the file for writing, which a
    reader of someone's mail must not do; its rule for where a message starts
    is the one used here.)"""
    texts: list[str] = []
    notes: tuple[str, ...] = ()
    total = 0
    with open_listed(path) as f:  # no symbolic link on its way (safe_open.py)
        head = f.read(5)
        if head != b"From ":
            raise ParseError('not an mbox mailbox (it does not start with a "From " line)')
        f.seek(0)
        for raw in _mbox_messages(stream=f):
            text = normalize_plain_text(text=message_text(message=_parse_message(data=raw)))
            total += len(text)
            if total > MAX_MAILBOX_CHARS:
                note = (
                    f"only the first {len(texts):,} messages were read "
                    f"(limit: {MAX_MAILBOX_CHARS:,} characters of text)"
                )
                notes = (note,)
                if texts:
                    texts[-1] = f"{texts[-1]}\n\n[{note}]"
                break
            texts.append(text)
    if not texts:
        raise ParseError("the mailbox holds no messages")
    return numbered_pages(
        path=path, texts=texts, empty_reason="no text in the mailbox", notes=notes
    )


def _mbox_messages(*, stream: BinaryIO) -> Iterator[bytes]:
    """Raw messages of an mbox: each starts at a line beginning "From " (the
    envelope line, dropped here). A body line that begins ">From " (or
    ">>From ") is the writer's escape for one with one ">" less."""
    lines: list[bytes] = []
    size = 0
    # Lines are read in bounded pieces: a file without newlines must not be
    # read into memory as one "line".
    for line in iter(lambda: stream.readline(_MAX_LINE_BYTES), b""):
        if line.startswith(b"From "):
            if lines:
                yield b"".join(lines)
            lines, size = [], 0
            continue
        if line.startswith(b">") and line.lstrip(b">").startswith(b"From "):
            line = line[1:]
        if size < MAX_MESSAGE_BYTES:
            lines.append(line)
            size += len(line)
    if lines:
        yield b"".join(lines)


def _parse_message(*, data: bytes) -> email.message.EmailMessage:
    message = BytesParser(policy=policy.default).parsebytes(data)
    assert isinstance(message, email.message.EmailMessage)  # policy.default's class
    return message


def message_text(*, message: email.message.EmailMessage) -> str:
    lines = [f"{name}: {value}" for name in _HEADERS if (value := _header(message, name))]
    attachments = _attachment_names(message=message)
    if attachments:
        lines.append("Attachments: " + ", ".join(attachments))
    body = _body_text(message=message)
    return "\n".join(lines) + (f"\n\n{body}" if body else "")


def _header(message: email.message.EmailMessage, name: str) -> str:
    try:
        value = message.get(name)
        return one_line(str(value)) if value is not None else ""
    except Exception:  # the header parser has known crashes on malformed addresses
        log.debug("header %s could not be parsed", name, exc_info=True)
        raw = [v for k, v in message.raw_items() if k.lower() == name.lower()]
        return one_line(str(raw[0])) if raw else ""


def _attachment_names(*, message: email.message.EmailMessage) -> list[str]:
    names: list[str] = []
    for part in _iter_attachments(message=message):
        try:
            name = part.get_filename()
        except Exception:
            name = None
        if not name and part.get_content_type() == "message/rfc822":
            name = "forwarded message"
        names.append(one_line(name) if name else f"unnamed {part.get_content_type()}")
    return names


def _iter_attachments(*, message: email.message.EmailMessage) -> list[email.message.EmailMessage]:
    try:
        return list(message.iter_attachments())  # type: ignore[arg-type]
    except Exception:  # malformed MIME structure
        log.debug("attachments could not be listed", exc_info=True)
        return []


def _body_text(*, message: email.message.EmailMessage) -> str:
    try:
        part = message.get_body(preferencelist=("plain", "html"))
    except Exception:
        log.debug("body part could not be found", exc_info=True)
        part = None
    if part is None:
        return ""
    text = _part_text(part=part)
    if part.get_content_subtype() == "html":
        return html_to_text(data=text)
    return text


def _part_text(*, part: email.message.EmailMessage) -> str:
    try:
        content = part.get_content()
        if isinstance(content, str):
            return content
    except (LookupError, UnicodeError, ValueError, KeyError, AssertionError):
        # An unknown or wrong charset: decode the bytes the way text files are.
        pass
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    try:
        return decode_text_bytes(data=payload).text
    except BinaryContentError:
        return ""
