"""Memory sizes as people write them ("24GB", "12GiB", "512M") and as we show them.

Units follow SI and IEC strictly so that a figure means one thing: "GB" is 10^9
bytes and "GiB" is 2^30. A bare letter ("512M", "16G") is binary, the way `free`,
Docker and most memory tools read it, since memory is what these flags describe.
"""

from __future__ import annotations

import re

_DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)(b?)\s*$", re.IGNORECASE)

GIB = 2**30


def parse_size(text: str) -> int:
    """Bytes in `text`: "24GB" → 24·10^9, "12GiB" → 12·2^30, "512M" → 512·2^20, "100" → 100.

    Raises ValueError with the accepted forms when `text` is not a size.
    """
    match = _SIZE_RE.match(text)
    if match is None:
        raise ValueError(
            f"not a size: {text!r} (write e.g. 24GB, 12GiB, 512M or a number of bytes)"
        )
    number, prefix, binary, byte_suffix = match.groups()
    prefix = prefix.lower()
    if binary and not prefix:
        raise ValueError(f"not a size: {text!r} ('i' needs a prefix, as in KiB, MiB, GiB)")
    # "GB" (prefix + B, no i) is decimal; "GiB", "Gi" and a bare "G" are binary.
    decimal = bool(prefix) and not binary and bool(byte_suffix)
    scale = (_DECIMAL if decimal else _BINARY)[prefix]
    return round(float(number) * scale)


def format_gib(n_bytes: int | float, *, digits: int = 1) -> str:
    """`n_bytes` as GiB with `digits` decimals: 25769803776 → "24.0 GiB"."""
    return f"{n_bytes / GIB:.{digits}f} GiB"
