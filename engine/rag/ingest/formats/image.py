"""Images of documents (PNG, JPEG, TIFF) read by OCR: one page per image, or
per frame of a multi-page TIFF (how scanners save several pages)."""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path

from engine.errors import ParseError
from engine.rag.ingest.formats.base import ParsedDocument, numbered_pages

# Frames read from one TIFF at most: a scanner's multi-page file is tens of
# pages; thousands of frames are a data file.
_MAX_FRAMES = 1000
# Fewer recognised characters than this (after low-confidence lines are
# dropped) means there was no document in the picture.
_MIN_TEXT_CHARS = 12


def parse_image(
    *, path: Path, data: bytes, progress: Callable[[int, int], None] | None = None
) -> ParsedDocument:
    from PIL import Image, UnidentifiedImageError

    from engine.rag.ingest.ocr import ocr_available, read_image

    if not ocr_available():
        raise ParseError("images are read by OCR, which is not installed (rapidocr)")
    try:
        with warnings.catch_warnings():
            # Pillow's guard against decompression bombs (over about 89
            # megapixels) refuses the file instead of warning and decoding it.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            frames = min(getattr(image, "n_frames", 1), _MAX_FRAMES)
            texts: list[str] = []
            for frame in range(frames):
                image.seek(frame)
                image.load()
                texts.append(read_image(image=image).text)
                if progress is not None and frames > 1:
                    progress(frame + 1, frames)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ParseError(
            f"image too large to read (over {Image.MAX_IMAGE_PIXELS // 1_000_000} megapixels)"
        ) from e
    except UnidentifiedImageError as e:
        raise ParseError("not a readable image (damaged or not an image format)") from e
    except (OSError, SyntaxError, ValueError) as e:
        raise ParseError(f"image is damaged or truncated ({e})"[:300]) from e
    if sum(len("".join(text.split())) for text in texts) < _MIN_TEXT_CHARS:
        raise ParseError("no text found in the image (OCR read nothing: a photo, not a document?)")
    return numbered_pages(path=path, texts=texts, empty_reason="no text found in the image")
