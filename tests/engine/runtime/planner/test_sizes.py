import pytest

from engine.runtime.planner.sizes import format_gib, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24GB", 24 * 10**9),
        ("12GiB", 12 * 2**30),
        ("512M", 512 * 2**20),
        ("16g", 16 * 2**30),
        ("1.5TB", 1_500_000_000_000),
        ("2 TiB", 2 * 2**40),
        ("100", 100),
        ("64MiB", 64 * 2**20),
        ("1kb", 1000),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GB", "twelve", "12XB", "-1GB", "12 i"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(text)


def test_format_gib() -> None:
    assert format_gib(24 * 2**30) == "24.0 GiB"
    assert format_gib(3 * 2**29, digits=2) == "1.50 GiB"
