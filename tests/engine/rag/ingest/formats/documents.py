"""Small documents of every new format, written by the libraries that read
them (python-pptx, openpyxl, odfpy, EbookLib) or by hand (.csv, .rtf, .eml,
.mbox). Each states one fact on a known page; the tests and the retrieval
check ask about it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

import openpyxl
from ebooklib import epub
from odf.opendocument import OpenDocumentText
from odf.table import Table, TableCell, TableColumn, TableRow
from odf.text import H, LineBreak, List, ListItem, P, S
from pptx import Presentation
from pptx.util import Inches


@dataclass(frozen=True, kw_only=True)
class Fact:
    file_name: str
    page: int | None
    fact: str  # words that appear verbatim (whitespace aside) on that page
    question: str


FACTS = (
    Fact(
        file_name="falcon.pptx",
        page=3,
        fact="The Falcon launch window opens on 14 March 2027.",
        question="When does the launch window for Falcon open?",
    ),
    Fact(
        file_name="inventory.xlsx",
        page=2,
        fact="Item: copper valve; Warehouse: Leipzig; Quantity: 420",
        question="How many copper valves are stored in the Leipzig warehouse?",
    ),
    Fact(
        file_name="contacts.csv",
        page=None,
        fact="Name: Zoë Müller; City: Graz; Role: beekeeping instructor",
        question="Who teaches beekeeping, and in which city?",
    ),
    Fact(
        file_name="handbook.odt",
        page=None,
        fact="Employees receive 28 days of paid holiday per year.",
        question="How much paid vacation do staff get annually?",
    ),
    Fact(
        file_name="lighthouse.epub",
        page=2,
        fact="The lighthouse keeper was named Tobias Wren.",
        question="What was the name of the man who kept the lighthouse?",
    ),
    Fact(
        file_name="warranty.rtf",
        page=None,
        fact="Your warranty for the dishwasher expires on 30 June 2028.",
        question="Until when is the dishwasher under warranty?",
    ),
    Fact(
        file_name="invoice.eml",
        page=None,
        fact="The invoice total is 1,284 euros, payable within 30 days.",
        question="What is the total amount of the invoice?",
    ),
    Fact(
        file_name="office.mbox",
        page=2,
        fact="The server room door code changed to 4417.",
        question="What is the new code for the server room door?",
    ),
)


def write_pptx(*, path: Path) -> Path:
    deck = Presentation()
    title_slide = deck.slides.add_slide(deck.slide_layouts[0])
    title_slide.shapes.title.text = "Project Falcon kickoff"
    title_slide.placeholders[1].text = "Aerospace team\vSpring planning"

    budget = deck.slides.add_slide(deck.slide_layouts[5])  # title only
    budget.shapes.title.text = "Budget"
    table = budget.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, row in enumerate((("Item", "Cost"), ("Engines", "2.1 M"), ("Avionics", "0.8 M"))):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    # Added first but placed lower: reading order puts it after the table.
    low = budget.shapes.add_textbox(Inches(1), Inches(5), Inches(6), Inches(1))
    low.text_frame.text = "Figures exclude taxes."
    group = budget.shapes.add_group_shape()
    grouped = group.shapes.add_textbox(Inches(1), Inches(6), Inches(6), Inches(1))
    grouped.text_frame.text = "Grouped remark on suppliers."

    schedule = deck.slides.add_slide(deck.slide_layouts[1])
    schedule.shapes.title.text = "Schedule"
    schedule.placeholders[1].text = "Design review in January"
    schedule.notes_slide.notes_text_frame.text = FACTS[0].fact

    deck.slides.add_slide(deck.slide_layouts[6])  # blank: no text at all
    deck.save(str(path))
    return path


def write_xlsx(*, path: Path) -> Path:
    workbook = openpyxl.Workbook()
    summary = workbook.active
    summary.title = "Summary"
    summary["A1"] = "Stock report for the spring quarter"
    summary["A2"] = "Prepared"
    summary["B2"] = dt.datetime(2026, 4, 1)
    stock = workbook.create_sheet("Stock")
    stock.append(["Item", "Warehouse", "Quantity", "Unit price"])
    stock.append(["brass fitting", "Hamburg", 1200, 0.35])
    stock.append(["copper valve", "Leipzig", 420, 12.5])
    stock.append([None, None, None, None])
    stock.append(["steel pipe", "Leipzig", 75, 0.1 + 0.2])
    workbook.create_sheet("Empty")
    workbook.save(path)
    return path


def write_csv(*, path: Path) -> Path:
    rows = [
        "Name;City;Role",
        "Anna Berg;Linz;gardener",
        '"Zoë Müller";Graz;beekeeping instructor',
        'Luis Ortega;Salzburg;"carpenter; part time"',
    ]
    # Windows Excel writes CSV in the ANSI code page with semicolons in much of Europe.
    path.write_bytes("\r\n".join(rows).encode("cp1252"))
    return path


def write_odt(*, path: Path) -> Path:
    document = OpenDocumentText()
    document.text.addElement(H(outlinelevel=1, text="Staff handbook"))
    paragraph = P(text="Welcome to the company.")
    paragraph.addElement(LineBreak())
    paragraph.addText("Please read this handbook   carefully.")
    document.text.addElement(paragraph)
    document.text.addElement(H(outlinelevel=2, text="Leave"))
    document.text.addElement(P(text=FACTS[3].fact))
    items = List()
    for text in ("Sick leave needs a certificate after three days.", "Parental leave"):
        item = ListItem()
        item.addElement(P(text=text))
        items.addElement(item)
    document.text.addElement(items)
    table = Table(name="Hours")
    table.addElement(TableColumn(numbercolumnsrepeated=2))
    for cells in (("Day", "Hours"), ("Friday", "9 to 14")):
        row = TableRow()
        for value in cells:
            cell = TableCell()
            cell.addElement(P(text=value))
            row.addElement(cell)
        table.addElement(row)
    document.text.addElement(table)
    spaced = P(text="Two")
    spaced.addElement(S(c=2))
    spaced.addText("spaces kept.")
    document.text.addElement(spaced)
    document.save(str(path))
    return path


def write_epub(*, path: Path) -> Path:
    book = epub.EpubBook()
    book.set_identifier("lighthouse-1")
    book.set_title("The Lighthouse")
    book.set_language("en")
    texts = (
        ("Arrival", "The ship reached the island at dawn. Gulls circled the rocks."),
        ("The keeper", FACTS[4].fact + " He had lived alone for eleven winters."),
        ("Storm", "By nightfall the storm had broken the harbour wall."),
    )
    chapters = []
    for number, (title, body) in enumerate(texts, start=1):
        chapter = epub.EpubHtml(title=title, file_name=f"chap_{number}.xhtml", lang="en")
        chapter.content = f"<h1>{title}</h1><p>{body}</p>"
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    # Reading order differs from the order the files were added.
    book.spine = ["nav", chapters[0], chapters[1], chapters[2]]
    epub.write_epub(str(path), book)
    return path


def write_rtf(*, path: Path) -> Path:
    path.write_bytes(
        b"{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0\\fswiss Arial;}}"
        b"{\\info{\\title Warranty letter}}"
        b"\\f0\\pard Dear customer,\\par\\pard "
        b"Your warranty for the dishwasher expires on 30 June 2028.\\par "
        b"Caf\\'e9 cr\\'e8me and \\u8364? 5 \\u-10179?\\u-8704? thanks\\par}"
    )
    return path


def _message(*, subject: str, sender: str, body: str, date: str) -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = sender
    message["To"] = "Team <team@example.com>"
    message["Date"] = date
    message.set_content(body)
    return message


def write_eml(*, path: Path) -> Path:
    message = EmailMessage()
    message["Subject"] = "Rechnung Nr. 2024-117 für März"
    message["From"] = "Billing <billing@example.com>"
    message["To"] = "Ada <ada@example.com>"
    message["Date"] = "Tue, 01 Oct 2024 10:00:00 +0200"
    message.set_content("Hello Ada,\n\n" + FACTS[6].fact + "\n\nRegards")
    message.add_alternative(
        "<html><body><p>Hello Ada,</p><p>HTML copy of the invoice.</p></body></html>",
        subtype="html",
    )
    message.add_attachment(
        b"%PDF-1.4 fake", maintype="application", subtype="pdf", filename="invoice-117.pdf"
    )
    path.write_bytes(message.as_bytes())
    return path


def write_mbox(*, path: Path) -> Path:
    messages = (
        _message(
            subject="Lunch on Friday",
            sender="Bea <bea@example.com>",
            body="Shall we try the new noodle place?\nFrom what I hear it is good.",
            date="Mon, 02 Sep 2024 09:00:00 +0000",
        ),
        _message(
            subject="Security notice",
            sender="Facilities <facilities@example.com>",
            body=FACTS[7].fact + "\nPlease do not share it.",
            date="Tue, 03 Sep 2024 09:00:00 +0000",
        ),
        _message(
            subject="Holiday party",
            sender="Carl <carl@example.com>",
            body="The party is on 12 December in the atrium.",
            date="Wed, 04 Sep 2024 09:00:00 +0000",
        ),
    )
    chunks = []
    for message in messages:
        # mboxo escapes body lines that start with "From ".
        raw = message.as_bytes().replace(b"\nFrom ", b"\n>From ")
        chunks.append(b"From sender@example.com Mon Sep  2 09:00:00 2024\n" + raw + b"\n")
    path.write_bytes(b"".join(chunks))
    return path


WRITERS = {
    "falcon.pptx": write_pptx,
    "inventory.xlsx": write_xlsx,
    "contacts.csv": write_csv,
    "handbook.odt": write_odt,
    "lighthouse.epub": write_epub,
    "warranty.rtf": write_rtf,
    "invoice.eml": write_eml,
    "office.mbox": write_mbox,
}


def write_all(*, folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return {name: writer(path=folder / name) for name, writer in WRITERS.items()}
