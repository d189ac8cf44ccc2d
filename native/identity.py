"""Who the app is to the desktop: one value that every integration file uses.

installer/app_spec.toml holds the same fields for the packaging recipes; a test
keeps the two equal (the wheel does not carry installer/, so this copy is needed).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class AppIdentity:
    name: str = "RAGDoll"
    app_id: str = "ragdoll"  # desktop file basename, icon name, WM class
    reverse_dns: str = "org.ragdoll.RAGDoll"  # macOS bundle id, LaunchAgent label stem
    comment: str = "Ask questions about your own documents, on your own machine"
    generic_name: str = "Document Assistant"
    categories: tuple[str, ...] = ("Office",)
    keywords: tuple[str, ...] = ("RAG", "documents", "search", "question", "PDF")
    # Documents RAGDoll reads (every format of engine/rag/ingest/parsers.py); "Open with
    # RAGDoll" adds them and opens the window.
    mime_types: tuple[str, ...] = (
        "application/pdf",
        "text/plain",
        "text/markdown",
        "text/html",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "text/csv",
        "text/tab-separated-values",
        "application/vnd.oasis.opendocument.text",
        "application/epub+zip",
        "application/rtf",
        "message/rfc822",
        "application/mbox",
        "image/png",  # images of pages are read with OCR
        "image/jpeg",
        "image/tiff",
    )
    ask_folder_label: str = "Ask RAGDoll about this folder"
    summary: str = "Ask questions about your own documents"  # AppStream: short, no full stop
    license: str = "MIT"
    homepage: str = "https://github.com/ragdoll-desktop/ragdoll"
    developer: str = "RAGDoll contributors"


IDENTITY = AppIdentity()
