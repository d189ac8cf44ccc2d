"""A minimal but valid OLE2 compound file (CFB version 3), written by hand.

Office saves a password-protected .docx/.xlsx/.pptx as such a file holding the
streams EncryptionInfo and EncryptedPackage; old binary .xls files hold a
Workbook stream. No library here writes either, so the tests build them."""

from __future__ import annotations

import struct
from pathlib import Path

SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
SECTOR = 512
FREE, END, FAT_SECTOR, NO_STREAM = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF
STREAM_SECTORS = 8  # 4096 bytes each: at the mini-stream cutoff, so in normal sectors


def _entry(*, name: str, kind: int, right: int, child: int, start: int, size: int) -> bytes:
    encoded = (name + "\0").encode("utf-16-le") if name else b""
    return (
        encoded.ljust(64, b"\0")
        + struct.pack("<HBB", len(encoded), kind, 1)
        + struct.pack("<III", NO_STREAM, right, child)
        + bytes(16 + 4 + 8 + 8)
        + struct.pack("<IQ", start, size)
    )


def write_ole2(*, path: Path, streams: tuple[str, str]) -> Path:
    """Two streams, each 4096 bytes of filler. CFB sorts siblings by name
    length first, so the shorter name must come first in `streams`."""
    first, second = streams
    assert len(first) <= len(second)
    header = (
        SIGNATURE
        + bytes(16)
        + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
        + bytes(6)
        + struct.pack("<IIIIIIIII", 0, 1, 1, 0, 4096, END, 0, END, 0)
        + struct.pack("<I", 0)
        + struct.pack("<I", FREE) * 108
    )
    assert len(header) == SECTOR
    fat = [FAT_SECTOR, END]
    for _stream in range(2):
        start = len(fat)
        fat.extend(range(start + 1, start + STREAM_SECTORS))
        fat.append(END)
    fat.extend([FREE] * (128 - len(fat)))
    directory = (
        _entry(name="Root Entry", kind=5, right=NO_STREAM, child=1, start=END, size=0)
        + _entry(name=first, kind=2, right=2, child=NO_STREAM, start=2, size=4096)
        + _entry(name=second, kind=2, right=NO_STREAM, child=NO_STREAM, start=10, size=4096)
        + _entry(name="", kind=0, right=NO_STREAM, child=NO_STREAM, start=0, size=0)
    )
    body = struct.pack("<128I", *fat) + directory + bytes([0x5A]) * (2 * STREAM_SECTORS * SECTOR)
    path.write_bytes(header + body)
    return path


def write_encrypted_office_file(*, path: Path) -> Path:
    return write_ole2(path=path, streams=("EncryptionInfo", "EncryptedPackage"))


def write_legacy_xls(*, path: Path) -> Path:
    return write_ole2(path=path, streams=("Workbook", "SummaryInformation"))
