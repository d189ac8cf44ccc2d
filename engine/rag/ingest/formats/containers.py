"""Checks on zip-based document files (Office Open XML, OpenDocument, EPUB)
before a library opens them, so that the common ways they go wrong get a reason
a person can act on instead of a library's stack trace text."""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Callable

from engine.errors import ParseError

OLE2_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ZIP_SIGNATURES = (b"PK\x03\x04", b"PK\x05\x06")  # a file, or an empty archive
# Stream names inside an OLE2 compound file, as stored there (UTF-16-LE).
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")
_LEGACY_STREAMS = (
    ("WordDocument".encode("utf-16-le"), ".doc"),
    ("Workbook".encode("utf-16-le"), ".xls"),
    ("Book".encode("utf-16-le"), ".xls"),
    ("PowerPoint Document".encode("utf-16-le"), ".ppt"),
)
# Libraries that build a whole document in memory (python-pptx, python-docx,
# odfpy, EbookLib) must not be handed an archive that unpacks to more than this.
MAX_UNPACKED_BYTES = 1024 * 1024 * 1024
# What reading a member of a damaged archive raises (bad CRC, broken deflate
# stream, cut-off data; a garbled header reads as a zip feature Python lacks);
# parsers turn these into "damaged" reasons.
DAMAGED_ZIP_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    NotImplementedError,
)


def open_zip(
    *,
    data: bytes,
    kind: str,
    counted: Callable[[str], bool] = lambda name: True,
) -> zipfile.ZipFile:
    """The file as a zip archive, or ParseError saying why it is not one.

    `kind` names the format in reasons (".pptx"); `counted` selects the members
    whose unpacked size counts against MAX_UNPACKED_BYTES (a reader that streams
    some parts can exempt them)."""
    if data.startswith(OLE2_SIGNATURE):
        raise ParseError(ole2_reason(data=data, kind=kind))
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as e:
        if data.startswith(_ZIP_SIGNATURES):
            raise ParseError(f"{kind} file is damaged or truncated (broken zip container)") from e
        raise ParseError(f"not a valid {kind} file (damaged, or another format renamed)") from e
    unpacked = sum(m.file_size for m in members if counted(m.filename))
    if unpacked > MAX_UNPACKED_BYTES:
        raise ParseError(
            f"{kind} file unpacks to {_amount(unpacked)}, "
            f"more than the {_amount(MAX_UNPACKED_BYTES)} RAGDoll reads"
        )
    return archive


def _amount(size: int) -> str:
    """Bytes, exactly, and in MB to read at a glance: whole MB alone hid the
    difference ("unpacks to 1024 MB, more than the 1024 MB")."""
    return f"{size:,} bytes ({size / (1024 * 1024):,.1f} MB)"


def ole2_reason(*, data: bytes, kind: str) -> str:
    """Why an OLE2 compound file is not the zip-based file its name promises.
    Office saves a password-protected .docx/.xlsx/.pptx as an OLE2 container
    with an EncryptedPackage stream; an old binary file (.doc, .xls, .ppt)
    renamed to the new suffix is OLE2 too."""
    # The directory holding stream names sits anywhere in the file; names are
    # short, so scanning for them is cheap and needs no OLE2 reader.
    if _ENCRYPTED_PACKAGE in data:
        return f"{kind} file is encrypted (password protected)"
    for name, legacy in _LEGACY_STREAMS:
        if name in data:
            return (
                f"this is an old binary {legacy} file renamed to {kind}; "
                f"open it and save it as {kind}"
            )
    return f"not a valid {kind} file (an OLE2 compound file, not a zip container)"


def read_member(*, archive: zipfile.ZipFile, name: str, kind: str) -> bytes:
    """One member of the archive; a missing or corrupt one is a damaged file."""
    try:
        return archive.read(name)
    except KeyError as e:
        raise ParseError(f"{kind} file is damaged ({name} is missing)") from e
    except (*DAMAGED_ZIP_ERRORS, OSError, ValueError) as e:
        raise ParseError(f"{kind} file is damaged or truncated ({name}: {e})"[:300]) from e
