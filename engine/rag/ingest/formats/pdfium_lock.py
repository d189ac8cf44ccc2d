"""One lock for every PDFium call in a process, and a render that frees its bitmap.

PDFium keeps global state and is not thread-safe, not even for different
documents: two threads inside it at once can crash the process (a viewer page
rendered on its worker while a PDF was parsed on another thread did, in CI).
The viewer renders on worker threads and the engine may parse in-process, so
every PDFium caller holds this lock. It is process state by nature, which is
why it lives at module level.
"""

from __future__ import annotations

import threading
from typing import Any

PDFIUM_LOCK = threading.RLock()


def render_to_pil(*, page: Any, scale: float) -> Any:
    """The page as a PIL image that owns its pixels. The bitmap is closed here,
    under the caller's lock, rather than by its finalizer on whichever thread
    the garbage collector happens to run."""
    bitmap = page.render(scale=scale)
    try:
        return bitmap.to_pil().copy()
    finally:
        bitmap.close()
