from __future__ import annotations

import datetime as dt
from pathlib import Path

import openpyxl
import pytest

from engine.rag.ingest.formats import table_rows
from engine.rag.ingest.parsers import parse_file
from tests.engine.rag.ingest.formats.documents import write_csv, write_xlsx
from tests.engine.rag.ingest.formats.helpers import reason


def test_xlsx_one_page_per_sheet_with_header_value_rows(tmp_path: Path) -> None:
    doc = parse_file(path=write_xlsx(path=tmp_path / "inventory.xlsx"))
    assert doc.page_count == 3
    assert [page.number for page in doc.pages] == [1, 2, 3]
    assert doc.pages[0].text == (
        "Sheet: Summary\n\nRow 1: Stock report for the spring quarter\nRow 2: Prepared | 2026-04-01"
    )
    assert doc.pages[1].text == (
        "Sheet: Stock\n\n"
        "Columns: Item | Warehouse | Quantity | Unit price\n"
        "Row 2: Item: brass fitting; Warehouse: Hamburg; Quantity: 1200; Unit price: 0.35\n"
        "Row 3: Item: copper valve; Warehouse: Leipzig; Quantity: 420; Unit price: 12.5\n"
        "Row 5: Item: steel pipe; Warehouse: Leipzig; Quantity: 75; Unit price: 0.3"
    )
    assert doc.pages[2].text == ""  # an empty sheet keeps its number
    assert doc.notes == ()


def test_xlsx_formulas_give_their_cached_values(tmp_path: Path) -> None:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(["Net", "Tax", "Total"])
    sheet.append([100, 19, "=A2+B2"])
    workbook.save(tmp_path / "calc.xlsx")
    # openpyxl stores no cached result (Excel and LibreOffice do): the formula
    # text is never shown as if it were the value.
    text = parse_file(path=tmp_path / "calc.xlsx").pages[0].text
    assert text.endswith("Row 2: Net: 100; Tax: 19")


def test_xlsx_title_row_then_header_and_blank_header_cells(tmp_path: Path) -> None:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet["A1"] = "Prices 2026"
    sheet.append([])
    sheet.append(["Product", None, "Price"])
    sheet.append(["Kettle", "blue", 39.9])
    sheet.append([dt.date(2026, 1, 5), True, dt.datetime(2026, 1, 5, 14, 30)])
    workbook.save(tmp_path / "prices.xlsx")
    assert parse_file(path=tmp_path / "prices.xlsx").pages[0].text == (
        "Sheet: Sheet\n\nRow 1: Prices 2026\nColumns: Product | Price\n"
        "Row 4: Product: Kettle; B: blue; Price: 39.9\n"
        "Row 5: Product: 2026-01-05; B: TRUE; Price: 2026-01-05 14:30:00"
    )


def test_huge_sheet_is_cut_at_the_row_limit_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_rows, "MAX_ROWS_PER_TABLE", 50)
    workbook = openpyxl.Workbook(write_only=True)
    sheet = workbook.create_sheet("Log")
    sheet.append(["Event", "Count"])
    for n in range(1, 501):
        sheet.append([f"event {n}", n])
    workbook.save(tmp_path / "big.xlsx")
    doc = parse_file(path=tmp_path / "big.xlsx")
    lines = doc.pages[0].text.splitlines()
    assert lines[3] == "Row 2: Event: event 1; Count: 1"
    assert lines[-2] == "Row 51: Event: event 50; Count: 50"
    assert lines[-1].startswith("[sheet Log: only the first 50 rows were read")
    assert doc.notes == (lines[-1][1:-1],)


def test_cell_budget_is_shared_by_the_sheets_of_a_workbook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_rows, "MAX_CELLS_PER_DOCUMENT", 30)
    workbook = openpyxl.Workbook()
    for name in ("One", "Two"):
        sheet = workbook.create_sheet(name)
        for n in range(10):
            sheet.append([n, n * 2])
    del workbook["Sheet"]
    workbook.save(tmp_path / "two.xlsx")
    doc = parse_file(path=tmp_path / "two.xlsx")
    assert doc.pages[0].text.count("\nRow ") == 10
    assert doc.pages[1].text.count("\nRow ") == 5
    assert len(doc.notes) == 1 and doc.notes[0].startswith("sheet Two: only the first 5 rows")


def test_csv_sniffs_semicolons_and_decodes_cp1252(tmp_path: Path) -> None:
    doc = parse_file(path=write_csv(path=tmp_path / "contacts.csv"))
    assert doc.page_count is None
    assert doc.pages[0].text == (
        "Columns: Name | City | Role\n"
        "Row 2: Name: Anna Berg; City: Linz; Role: gardener\n"
        "Row 3: Name: Zoë Müller; City: Graz; Role: beekeeping instructor\n"
        "Row 4: Name: Luis Ortega; City: Salzburg; Role: carpenter; part time"
    )


def test_csv_without_header_tsv_and_utf8_bom(tmp_path: Path) -> None:
    (tmp_path / "plain.csv").write_bytes("\ufeff1,apples,0.5\n2,pears,0.7\n".encode())
    assert parse_file(path=tmp_path / "plain.csv").pages[0].text == (
        "Row 1: 1 | apples | 0.5\nRow 2: 2 | pears | 0.7"
    )
    (tmp_path / "sheet.tsv").write_text("Word\tMeaning\nHaus\thouse, home\n")
    assert parse_file(path=tmp_path / "sheet.tsv").pages[0].text == (
        "Columns: Word | Meaning\nRow 2: Word: Haus; Meaning: house, home"
    )


def test_csv_with_an_unbalanced_quote_keeps_every_line(tmp_path: Path) -> None:
    long_field = "x" * 200_000  # over the csv module's field limit once quoted
    (tmp_path / "broken.csv").write_text(f'Name,Note\nAda,"unclosed {long_field}\nBob,fine\n')
    text = parse_file(path=tmp_path / "broken.csv").pages[0].text
    assert "Name: Bob; Note: fine" in text


def test_csv_reasons(tmp_path: Path) -> None:
    (tmp_path / "photo.csv").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    assert reason(tmp_path / "photo.csv") == "not a CSV file (binary content)"
    (tmp_path / "blank.csv").write_text(",,,\n , ,\n")
    assert reason(tmp_path / "blank.csv") == "no text in the file"
