"""Screenshots for the docs: the real window on a real engine, driven like a person would.

    python -m app.screenshot --out docs/screenshots

It adds the sample collection, asks a question, waits for the answer, saves the
main window, opens the first source and saves the viewer, then opens the Hardware
panel and saves it (`--hardware-only` skips the rest; `--model` chooses a model
first so that the panel has a placement; `--profile` runs the active profile first
so that it has a T(B) fit). Then the Models dialog (the recommended models with
their verdicts) and the Activity window after several questions asked at once
(`--activity-only` takes just that one). Without --home it
uses a fresh temporary RAGDOLL_HOME, so the person's own library is never
touched, and the engine it starts there is stopped at the end. Run it on a
real display or under Xvfb (QT_QPA_PLATFORM=xcb): the offscreen platform has
no window decorations and fonts may differ.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

DEFAULT_QUESTION = "What happens when a file cannot be read?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--home", type=Path, help="RAGDOLL_HOME to use (default: a temporary one)")
    parser.add_argument("--question", default=DEFAULT_QUESTION)
    parser.add_argument(
        "--source-row",
        type=int,
        default=-1,
        help="which source to open (default: a cited one, on a page if possible)",
    )
    parser.add_argument("--hardware-only", action="store_true", help="only the Hardware panel")
    parser.add_argument("--batch-only", action="store_true", help="only the batch questions")
    parser.add_argument("--model", help="language model folder to choose before starting")
    parser.add_argument("--profile", action="store_true", help="run the active profile first")
    parser.add_argument(
        "--activity-only", action="store_true", help="only the Activity window (asks questions)"
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="ragdoll-shots-") as scratch:
        # Before any engine import: resolve_paths() reads it on every call.
        os.environ["RAGDOLL_HOME"] = str(args.home or Path(scratch) / "home")
        if args.model:
            _choose_model(args.model)
        if args.hardware_only:
            return take_hardware_screenshot(out=args.out, profile=args.profile)
        if args.batch_only:
            return take_batch_screenshots(out=args.out)
        if args.activity_only:
            return take_activity_screenshot(out=args.out)
        code = take_screenshots(out=args.out, question=args.question, source_row=args.source_row)
        code = code or take_batch_screenshots(out=args.out)
        code = code or take_hardware_screenshot(out=args.out, profile=args.profile)
        return code or take_activity_screenshot(out=args.out)


def _choose_model(model: str) -> None:
    """In the settings, before the engine starts: it loads the model as it warms up."""
    from engine.paths import resolve_paths
    from engine.service.settings import load_settings, save_settings, with_changes

    paths = resolve_paths().ensure()
    settings = load_settings(file=paths.settings_file)
    save_settings(
        file=paths.settings_file,
        settings=with_changes(settings, model=str(Path(model).expanduser().resolve())),
    )


def take_hardware_screenshot(*, out: Path, profile: bool) -> int:
    from engine.paths import resolve_paths

    if profile:
        from engine.service.profiling.samplers import profile_in_process

        # Blocking is fine in this script: no window is up yet.
        profile_in_process(paths=resolve_paths(), budget_s=60, progress=_print_progress)
    with _connected_window(out=out) as (app, window):
        if window is None:
            return 1
        window.show_hardware()
        panel = window.hardware_panel
        _wait(app, lambda: panel.info is not None or panel.refresh_button.isEnabled(), 120, "hw")
        if panel.info is None:
            print(panel.state_label.text(), file=sys.stderr)
            return 1
        _settle(app)
        _save(panel, out / "hardware.png")
        return 0


ACTIVITY_QUESTIONS = (
    "What happens when a file cannot be read?",
    "Which file formats can RAGDoll read?",
    "How do I add a folder?",
    "Where is the index kept?",
    "How do I choose a language model?",
    "What does the hardware panel show?",
    "Can I pause adding documents?",
    "What happens when a watched file changes?",
)


def take_activity_screenshot(*, out: Path) -> int:
    """The Models dialog, then the Activity window after questions asked in two waves,
    several at once (as several programs would ask): the engine batches them, and
    what the charts show is what it measured."""
    from app.chat.answer_stream import AnswerStream

    with _connected_window(out=out) as (app, window):
        if window is None:
            return 1
        _take_models_screenshot(app=app, window=window, out=out)
        _wait(app, lambda: window.library.documents_model.rowCount() > 0, 3, "docs", ok=True)
        if window.library.documents_model.rowCount() == 0:
            window.library.add_sample_collection()
            _wait(app, lambda: window.library.ingesting, 30, "ingestion start", ok=True)
            _wait(app, lambda: not window.library.ingesting, 600, "ingestion")
        _take_collections_screenshot(app=app, window=window, out=out)
        panel = window.show_activity()
        for wave in (ACTIVITY_QUESTIONS, ACTIVITY_QUESTIONS[:4]):
            # Streams of their own, beside the chat: many questions in flight at once.
            asked = [AnswerStream(request_id=i, question=q) for i, q in enumerate(wave)]
            for stream in asked:
                window.bridge.ask(stream=stream)
            _wait(app, lambda s=asked: all(a.ended for a in s), 600, "answers")
            _settle(app, 3.0)  # a few status polls between the waves
        if panel.pipeline is None:
            print("the engine reports no pipeline yet: the charts stay empty", file=sys.stderr)
        _settle(app, 2.0)
        _save(panel, out / "activity.png")
        return 0


NOTES = {
    "garden.txt": "The community garden has a budget of 4,200 euros for raised beds.\n",
    "bridge.md": "# Bridge\n\nThe Alder Street bridge needs four new bolts in October.\n",
}


def _take_collections_screenshot(*, app: Any, window: Any, out: Path) -> None:
    """A second folder in a collection of its own, next to the sample collection."""
    notes = Path(os.environ["RAGDOLL_HOME"]).parent / "My notes"
    notes.mkdir(parents=True, exist_ok=True)
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    window.library.start_job()
    window.bridge.add_folder(path=str(notes), collection="notes")
    _wait(app, lambda: not window.library.ingesting, 300, "the notes")
    _wait(app, lambda: window.library.folders_box.model.rowCount() == 2, 30, "folders")
    _settle(app)
    _save(window.library.parentWidget(), out / "library-collections.png")
    window.library.folders_box.show_collection("notes")
    _settle(app)
    _save(window.library.parentWidget(), out / "library-one-collection.png")
    window.library.folders_box.show_collection(None)


def _take_models_screenshot(*, app: Any, window: Any, out: Path) -> None:
    dialog = window.models_dialog
    window.model_chooser.models_action.trigger()
    _wait(app, lambda: bool(dialog.models), 120, "recommended models")
    dialog.table.selectRow(0)
    _settle(app)
    _save(dialog, out / "models.png")
    dialog.close()


def _print_progress(message: str, fraction: float) -> None:
    print(f"profiling {fraction:4.0%} {message}", flush=True)


def take_screenshots(*, out: Path, question: str, source_row: int) -> int:
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    with _connected_window(out=out) as (app, window):
        if window is None:
            return 1
        _wait(app, lambda: window.library.documents_model.rowCount() > 0, 3, "documents", ok=True)
        if window.library.documents_model.rowCount() == 0:
            window.library.add_sample_collection()
            _wait(app, lambda: window.library.progress_bar.value() >= 1, 600, "first file")
            _settle(app, 0.2)
            _save(window, out / "ingesting.png")
            _wait(app, lambda: not window.library.ingesting, 600, "ingestion")
            _wait(app, lambda: window.library.documents_model.rowCount() > 0, 30, "documents")

        window.chat.question.setText(question)
        window.chat.ask_button.click()
        _wait(app, lambda: window.chat.streaming, 5, "answer start", ok=True)
        _wait(app, lambda: not window.chat.streaming, 300, "answer")
        _settle(app)
        _save(window, out / "main-window.png")

        sources = window.chat.sources_model
        if sources.rowCount() == 0:
            print("the answer has no sources to open", file=sys.stderr)
            return 1
        if source_row < 0:
            # A source the answer actually cites, on a numbered page if there is one.
            rows = range(sources.rowCount())
            cited = [r for r in rows if f"[{sources.citation(r).index}]" in window.chat.answer_text]
            paged = [r for r in cited or rows if sources.citation(r).page is not None]
            source_row = (paged or cited or [0])[0]
        view = window.chat.sources
        index = window.chat.sources_model.index(source_row, 0)
        QTest.mouseClick(
            view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(index).center()
        )
        _wait(
            app,
            lambda: window.viewer.isVisible() and window.viewer.source is not None,
            30,
            "viewer",
        )
        _wait_for_page_image(app, window.viewer)
        _settle(app)
        _save(window.viewer, out / "viewer.png")
        window.viewer.close()
        return take_chat_screenshots(app=app, window=window, out=out, source_row=source_row)


MARKDOWN_QUESTION = "Summarise how RAGDoll handles files, as a list and a table."


def markdown_answer(*, citations: list[Any]) -> str:
    """An answer written the way a language model writes one, citing real sources.

    The screenshots run without a model (the test models are random weights), so
    this shows what the chat does with such an answer: Markdown rendered, the
    markers linked to the sources the engine really returned."""
    n = [c.index for c in citations] + [1, 1, 1]
    return (
        f"RAGDoll reads your files **on this computer** and cites them [{n[0]}]:\n\n"
        f"1. Add a folder; every supported file in it is indexed [{n[1]}].\n"
        f"2. Ask a question; the answer quotes the passages it used [{n[0]}].\n"
        "3. Click a marker to open the page with the passage highlighted.\n\n"
        "| Situation | What happens |\n"
        "|---|---|\n"
        f"| A file cannot be read | It is listed with the reason [{n[2]}] |\n"
        "| A file changes | It is indexed again |\n\n"
        "From the command line:\n\n"
        '```sh\nragdoll ask "What happens when a file cannot be read?"\n```\n'
    )


def take_chat_screenshots(*, app: Any, window: Any, out: Path, source_row: int) -> int:
    """Conversations, a Markdown answer, the welcome; then all of it again in dark."""
    from app.theme import apply_theme
    from engine.wire import AnswerDone, CitationsEvent, DoneEvent, TokenEvent

    chat = window.chat
    first = chat.current.id
    citations = [chat.sources_model.citation(r) for r in range(chat.sources_model.rowCount())]

    chat.new_chat()
    chat.question.setText("How do I add my own documents?")
    chat.ask_button.click()
    _wait(app, lambda: chat.streaming, 5, "answer start", ok=True)
    _wait(app, lambda: not chat.streaming, 300, "answer")

    chat.new_chat()
    answer = markdown_answer(citations=citations)
    # An illustrative answer (no model here): the pane's sig_ask is held back so
    # that the engine is not asked, and the stream is fed as the bridge would.
    chat.blockSignals(True)
    try:
        stream = chat.ask(question=MARKDOWN_QUESTION)
    finally:
        chat.blockSignals(False)
    stream.deliver(CitationsEvent(citations=citations))
    stream.deliver(TokenEvent(text=answer))
    stream.deliver(DoneEvent(done=AnswerDone(answer=answer, mode="generative")))
    markdown = chat.current.id

    for scheme in ("light", "dark"):
        suffix = "" if scheme == "light" else "-dark"
        apply_theme(app, scheme=scheme)
        if scheme == "dark":
            chat.switch_to(first)
            _settle(app)
            _save(window, out / "main-window-dark.png")
        chat.switch_to(markdown)
        _settle(app)
        _save(window, out / f"chat-markdown{suffix}.png")

        chat.conversation_list.search.setText("list and a table")
        _settle(app)
        _save(chat, out / f"conversations{suffix}.png")
        chat.conversation_list.search.clear()

        if scheme == "dark":
            chat.switch_to(first)
            _settle(app, 0.2)
            window._open_source(citations[_paged_row(citations)].chunk_id)
            _wait(app, lambda: window.viewer.isVisible(), 30, "viewer")
            _wait_for_page_image(app, window.viewer)
            _settle(app)
            _save(window.viewer, out / "viewer-dark.png")
            window.viewer.close()

        welcome = window.show_welcome()
        _settle(app)
        _save(welcome, out / f"welcome{suffix}.png")
        welcome.reject()
    apply_theme(app, scheme="light")
    _settle(app, 0.2)
    return 0


BATCH_QUESTIONS = (
    "What happens when a file cannot be read?",
    "How do I add a folder of documents?",
    "Which file formats can RAGDoll read?",
    "Does anything leave my computer?",
    "How do I choose a language model?",
)


def take_batch_screenshots(*, out: Path) -> int:
    """The batch questions dialog with its table filled in, light and dark."""
    from app.theme import apply_theme

    with _connected_window(out=out) as (app, window):
        if window is None:
            return 1
        _wait(app, lambda: window.library.documents_model.rowCount() > 0, 3, "documents", ok=True)
        if window.library.documents_model.rowCount() == 0:
            window.library.add_sample_collection()
            _wait(app, lambda: window.library.ingesting, 10, "ingestion start", ok=True)
            _wait(app, lambda: not window.library.ingesting, 600, "ingestion")
        dialog = window.show_batch()
        dialog.questions.setPlainText("\n".join(BATCH_QUESTIONS))
        dialog.run_button.click()
        _wait(app, lambda: not dialog.running, 600, "batch answers")
        dialog.table.selectRow(0)
        for scheme in ("light", "dark"):
            apply_theme(app, scheme=scheme)
            _settle(app)
            _save(dialog, out / ("batch.png" if scheme == "light" else "batch-dark.png"))
        apply_theme(app, scheme="light")
        dialog.close()
        return 0


def _paged_row(citations: list[Any]) -> int:
    paged = [i for i, c in enumerate(citations) if str(c.path).lower().endswith(".pdf")]
    return paged[0] if paged else 0


def _wait_for_page_image(app: Any, viewer: Any) -> None:
    """A PDF renders in a worker: wait for the page image (text formats have none)."""
    if viewer.modes.isVisible():
        _wait(app, lambda: viewer.pdf.shown is not None, 30, "page image")


@contextmanager
def _connected_window(*, out: Path) -> Iterator[tuple[Any, Any]]:
    """The main window, shown and connected to its engine, closed on exit.
    Yields window=None, after printing why, when the engine did not start."""
    from PySide6.QtWidgets import QApplication

    from app.main import configure_app
    from app.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    configure_app(app)
    window = MainWindow(show_welcome=False)  # shot on its own, not over the others
    window.show()
    out.mkdir(parents=True, exist_ok=True)
    try:
        _wait(app, lambda: window.bridge.connected or window.banner.isVisible(), 180, "engine")
        if not window.bridge.connected:
            print(window.banner.label.text(), file=sys.stderr)
            yield app, None
        else:
            yield app, window
    finally:
        window.close()
        _settle(app)


def _save(widget: object, path: Path) -> None:
    from PySide6.QtWidgets import QWidget

    assert isinstance(widget, QWidget)
    if not widget.grab().save(str(path)):
        raise OSError(f"could not write {path}")
    print(f"saved {path}")


def _wait(
    app: object, predicate: Callable[[], bool], timeout_s: float, what: str, *, ok: bool = False
) -> None:
    """Run the event loop until `predicate` holds; `ok`: a timeout is not an error."""
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication

    assert isinstance(app, QApplication)
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            if ok:
                return
            raise TimeoutError(f"gave up waiting for the {what} after {timeout_s:.0f} s")
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
        time.sleep(0.01)


def _settle(app: object, seconds: float = 0.5) -> None:
    """Let layouts, scrolling and painting finish before a grab."""
    _wait(app, lambda: False, seconds, "paint", ok=True)


if __name__ == "__main__":
    sys.exit(main())
