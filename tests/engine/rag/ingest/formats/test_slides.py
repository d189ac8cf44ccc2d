from __future__ import annotations

from pathlib import Path

from pptx import Presentation
from pptx.enum.shapes import PP_PLACEHOLDER
from pptx.util import Inches

from engine.rag.ingest.parsers import parse_file
from tests.engine.rag.ingest.formats.documents import write_pptx
from tests.engine.rag.ingest.formats.helpers import reason


def test_one_page_per_slide_with_tables_groups_and_notes(tmp_path: Path) -> None:
    doc = parse_file(path=write_pptx(path=tmp_path / "falcon.pptx"))
    assert doc.page_count == 4
    assert [page.number for page in doc.pages] == [1, 2, 3, 4]
    assert doc.pages[0].text == "Project Falcon kickoff\n\nAerospace team\nSpring planning"
    assert doc.pages[1].text == (
        "Budget\n\nItem | Cost\nEngines | 2.1 M\nAvionics | 0.8 M\n\n"
        "Figures exclude taxes.\n\nGrouped remark on suppliers."
    )
    assert doc.pages[2].text.endswith(
        "\n\nNotes:\nThe Falcon launch window opens on 14 March 2027."
    )
    assert doc.pages[3].text == ""  # a picture-only slide keeps its number


def test_footer_date_and_slide_number_are_left_out(tmp_path: Path) -> None:
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Quarterly results"
    slide.placeholders[1].text = "Revenue rose."
    # Copy the layout's footer and slide-number placeholders onto the slide,
    # as PowerPoint does when "Footer" is ticked.
    shown = {PP_PLACEHOLDER.FOOTER: "Contoso confidential", PP_PLACEHOLDER.SLIDE_NUMBER: "7"}
    for placeholder in slide.slide_layout.placeholders:
        kind = placeholder.placeholder_format.type
        if kind in shown:
            slide.shapes.clone_placeholder(placeholder)
            slide.placeholders[placeholder.placeholder_format.idx].text = shown[kind]
    assert len(slide.placeholders) == 4
    deck.save(str(tmp_path / "footer.pptx"))
    text = parse_file(path=tmp_path / "footer.pptx").pages[0].text
    assert text == "Quarterly results\n\nRevenue rose."


def test_reading_order_is_top_to_bottom(tmp_path: Path) -> None:
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    for top, words in ((3, "third"), (1, "first"), (2, "second")):
        box = slide.shapes.add_textbox(Inches(1), Inches(top), Inches(4), Inches(0.5))
        box.text_frame.text = words
    deck.save(str(tmp_path / "order.pptx"))
    assert parse_file(path=tmp_path / "order.pptx").pages[0].text == "first\n\nsecond\n\nthird"


def test_presentations_without_text(tmp_path: Path) -> None:
    deck = Presentation()
    deck.slides.add_slide(deck.slide_layouts[6])
    deck.save(str(tmp_path / "blank.pptx"))
    assert reason(tmp_path / "blank.pptx") == "no text on any slide"
    Presentation().save(str(tmp_path / "none.pptx"))
    assert reason(tmp_path / "none.pptx") == "the presentation has no slides"
