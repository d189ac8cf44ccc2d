"""The Models dialog on a fake engine: verdicts, picking a model, downloads."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.models_pane.models_dialog import (
    COLUMNS,
    ModelsDialog,
    attach_models_dialog,
    params_text,
    progress_text,
    speed_text,
)
from engine.wire import ModelAdvice
from tests.app.conftest import MakeWindow
from tests.app.fake_client import RECOMMENDED, FakeClient
from tests.support.stalls import Stopwatch


def open_dialog(
    make_window: MakeWindow, qtbot: QtBot, client: FakeClient, *, folder: str | None = None
) -> tuple[MainWindow, ModelsDialog]:
    window = make_window(client, choose_model_folder=lambda _parent: folder)
    dialog = window.models_dialog  # the window's own, opened from its Model menu
    assert window.model_chooser.models_action.isVisible()
    window.model_chooser.models_action.trigger()
    qtbot.waitUntil(lambda: dialog.table.rowCount() == len(RECOMMENDED.models), timeout=5000)
    return window, dialog


def cell(dialog: ModelsDialog, row: int, column: str) -> str:
    item = dialog.table.item(row, COLUMNS.index(column))
    assert item is not None
    return item.text()


def test_rows_show_the_verdict_and_speed(make_window: MakeWindow, qtbot: QtBot) -> None:
    _window, dialog = open_dialog(make_window, qtbot, FakeClient())
    assert [cell(dialog, r, "On this machine") for r in range(3)] == [
        "fits on GPU",
        "offloaded 40%",
        "too large: 12.0 GiB missing",
    ]
    assert [cell(dialog, r, "Expected speed") for r in range(3)] == [
        "≈ 120 tokens/s",
        "≈ 2.5 tokens/s",
        "—",
    ]
    assert cell(dialog, 0, "Parameters") == "494 M" and cell(dialog, 1, "Parameters") == "8.0 B"
    assert [cell(dialog, r, "Installed") for r in range(3)] == ["yes", "no", "no"]
    # What Download costs, before pressing it; "—" where the size is not known.
    assert [cell(dialog, r, "Download") for r in range(3)] == ["1.0 GB", "16.1 GB", "—"]
    assert "estimates" in dialog.note.text()
    assert "estimate" in (dialog.table.item(1, 0).toolTip() or "")


def test_fetched_off_the_gui_thread(make_window: MakeWindow, qtbot: QtBot) -> None:
    client = FakeClient()
    window = make_window(client)
    dialog = attach_models_dialog(chooser=window.model_chooser, bridge=window.bridge)
    qtbot.addWidget(dialog)
    client.delay_s = 0.5
    with Stopwatch() as trigger:
        window.model_chooser.models_action.trigger()
    assert trigger.took.own_s < 0.2, trigger.took  # the 0.5 s call runs in a worker
    assert dialog.table.rowCount() == 0
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 3, timeout=5000)


def test_use_installed_model_folder_and_extractive(make_window: MakeWindow, qtbot: QtBot) -> None:
    client = FakeClient()
    _window, dialog = open_dialog(make_window, qtbot, client, folder="/models/mine")
    dialog.table.selectRow(1)  # not installed
    assert not dialog.use_button.isEnabled() and dialog.download_button.isEnabled()
    dialog.table.selectRow(0)
    assert dialog.use_button.isEnabled() and not dialog.download_button.isEnabled()
    qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(client.called("set_model")) == 1, timeout=5000)
    assert client.called("set_model")[0] == {"model": "/models/Qwen--Qwen2-0.5B-Instruct"}
    dialog.folder_button.click()
    qtbot.waitUntil(lambda: len(client.called("set_model")) == 2, timeout=5000)
    assert client.called("set_model")[1] == {"model": "/models/mine"}
    dialog.extractive_button.click()
    qtbot.waitUntil(lambda: len(client.called("set_model")) == 3, timeout=5000)
    assert client.called("set_model")[2] == {"model": None}


def test_download_shows_progress_and_refreshes_when_done(
    make_window: MakeWindow, qtbot: QtBot
) -> None:
    client = FakeClient(download_steps=3)
    _window, dialog = open_dialog(make_window, qtbot, client)
    seen: list[int] = []
    dialog.progress.valueChanged.connect(seen.append)
    dialog.table.selectRow(1)
    dialog.download_button.click()
    assert "huggingface.co" in dialog.progress_label.text()
    qtbot.waitUntil(
        lambda: dialog.download is not None and dialog.download.state == "done", timeout=10000
    )
    assert client.called("download_model") == [
        {"repo_id": "meta-llama/Llama-3.1-8B-Instruct", "file": None}
    ]
    assert dialog.progress_label.text().startswith("Downloaded meta-llama/Llama-3.1-8B-Instruct")
    assert seen and seen == sorted(seen) and seen[-1] == 1000
    qtbot.waitUntil(lambda: len(client.called("recommended_models")) == 2, timeout=5000)


def test_cancel_a_download(make_window: MakeWindow, qtbot: QtBot) -> None:
    client = FakeClient(download_steps=1000)
    _window, dialog = open_dialog(make_window, qtbot, client)
    dialog.table.selectRow(1)
    dialog.download_button.click()
    qtbot.waitUntil(lambda: dialog.cancel_button.isEnabled(), timeout=5000)
    assert not dialog.download_button.isEnabled()
    dialog.cancel_button.click()
    qtbot.waitUntil(
        lambda: dialog.download is not None and dialog.download.state == "cancelled",
        timeout=10000,
    )
    assert client.called("cancel_download")
    assert "resumes" in dialog.progress_label.text()
    assert not dialog.cancel_button.isEnabled()


def test_refusal_is_shown(make_window: MakeWindow, qtbot: QtBot) -> None:
    from tests.app.fake_client import request_error

    client = FakeClient(fail={"download_model": request_error("The engine runs offline")})
    _window, dialog = open_dialog(make_window, qtbot, client)
    dialog.table.selectRow(1)
    dialog.download_button.click()
    qtbot.waitUntil(lambda: "offline" in dialog.progress_label.text(), timeout=5000)
    assert "failed" in dialog.progress_label.text()


def test_a_download_that_fails_stops_the_busy_bar(make_window: MakeWindow, qtbot: QtBot) -> None:
    """Issue #44, 5: without a network the bar (a busy one: no size known yet) went
    on moving after the failure."""
    from engine.service.models.download import NO_CONNECTION

    client = FakeClient(download_error=f"{NO_CONNECTION} (huggingface.co could not be reached).")
    _window, dialog = open_dialog(make_window, qtbot, client)
    dialog.table.selectRow(1)
    dialog.download_button.click()
    qtbot.waitUntil(
        lambda: dialog.download is not None and dialog.download.state == "failed", timeout=5000
    )
    assert NO_CONNECTION in dialog.progress_label.text()
    assert not dialog.progress.isVisible()
    assert not dialog.cancel_button.isEnabled() and dialog.download_button.isEnabled()


def test_texts() -> None:
    assert params_text(70_553_706_496) == "70.6 B"
    slow = replace(RECOMMENDED.models[1], expected_tokens_per_s=0.02)
    assert speed_text(slow) == "≈ 50 s per token"


def test_progress_text_counts_files_and_resumed_bytes() -> None:
    from engine.wire import ModelDownload

    d = ModelDownload(
        download_id="d",
        repo_id="org/m",
        state="running",
        folder="/m",
        files_done=1,
        files_total=3,
        bytes_done=3 * 2**20,
        bytes_total=2**31,
        bytes_resumed=2**20,
    )
    assert progress_text(d) == (
        "Downloading org/m: 3.0 MiB of 2.0 GiB, 1.0 MiB resumed (file 2 of 3)"
    )


def test_a_models_gguf_files_are_listed_with_size_and_verdict(
    make_window: MakeWindow, qtbot: QtBot
) -> None:
    from engine.wire import GGUFVariantAdvice

    variant = GGUFVariantAdvice(
        repo="Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        file="qwen2.5-0.5b-instruct-q4_k_m.gguf",
        quant="Q4_K_M",
        file_bytes=400_000_000,
        verdict="fits in RAM",
        note="Q4_K_M: about 0.37 GiB on disk and streamed",
    )
    first = replace(RECOMMENDED.models[0], gguf_variants=[variant])
    client = FakeClient(recommended=replace(RECOMMENDED, models=[first, *RECOMMENDED.models[1:]]))
    _window, dialog = open_dialog(make_window, qtbot, client)
    tip = dialog.table.item(0, 0).toolTip()
    assert "GGUF Q4_K_M: Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf" in tip
    assert "0.37 GiB" in tip and "fits in RAM" in tip
    assert "GGUF" not in dialog.table.item(1, 0).toolTip()  # a model without GGUF files


def test_a_downloaded_gguf_file_is_shown_and_used(make_window: MakeWindow, qtbot: QtBot) -> None:
    """A model whose GGUF file is on disk (not its own weights) can be chosen in the
    dialog; its GGUF sizes and verdicts show under the table, not only in a tooltip."""
    from engine.wire import GGUFVariantAdvice

    q4 = GGUFVariantAdvice(
        repo="someone/Big-GGUF",
        file="big-q4_k_m.gguf",
        quant="Q4_K_M",
        file_bytes=4_800_000_000,
        verdict="fits in RAM",
        note="Q4_K_M: about 4.5 GiB, held so in memory and on disk",
        installed_path="/hub/models--someone--Big-GGUF/snapshots/abc/big-q4_k_m.gguf",
    )
    q8 = replace(q4, file="big-q8_0.gguf", quant="Q8_0", verdict="offloaded 20%")
    q8 = replace(q8, file_bytes=8_500_000_000, installed_path=None)
    second = replace(RECOMMENDED.models[1], gguf_variants=[q4, q8])
    models = [RECOMMENDED.models[0], second, *RECOMMENDED.models[2:]]
    client = FakeClient(recommended=replace(RECOMMENDED, models=models))
    _window, dialog = open_dialog(make_window, qtbot, client)
    assert cell(dialog, 1, "Installed") == "GGUF"
    dialog.table.selectRow(0)
    assert dialog.gguf_label.text() == "" and dialog.gguf_label.isHidden()
    dialog.table.selectRow(1)
    assert not dialog.gguf_label.isHidden()
    assert dialog.gguf_label.text() == (
        f"GGUF files of {second.name} (llama.cpp's format, smaller): "
        "Q4_K_M 4.8 GB: fits in RAM (downloaded); Q8_0 8.5 GB: offloaded 20%"
    )
    assert dialog.use_button.isEnabled()
    qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(client.called("set_model")) == 1, timeout=5000)
    assert client.called("set_model")[0] == {"model": q4.installed_path}


def test_download_gguf_fetches_the_selected_models_first_missing_file(
    make_window: MakeWindow, qtbot: QtBot
) -> None:
    from engine.wire import GGUFVariantAdvice

    q4 = GGUFVariantAdvice(
        repo="someone/Big-GGUF",
        file="big-q4_k_m.gguf",
        quant="Q4_K_M",
        file_bytes=4_800_000_000,
        verdict="fits in RAM",
        note="Q4_K_M: about 4.5 GiB, held so in memory and on disk",
    )
    second = replace(RECOMMENDED.models[1], gguf_variants=[q4])
    models = [RECOMMENDED.models[0], second, *RECOMMENDED.models[2:]]
    client = FakeClient(recommended=replace(RECOMMENDED, models=models), download_steps=2)
    _window, dialog = open_dialog(make_window, qtbot, client)
    dialog.table.selectRow(0)  # no GGUF files
    assert not dialog.gguf_download_button.isEnabled()
    dialog.table.selectRow(1)
    assert dialog.gguf_download_button.isEnabled()
    assert dialog.gguf_download_button.text() == "Download GGUF (Q4_K_M, 4.8 GB)"
    dialog.gguf_download_button.click()
    assert "someone/Big-GGUF/big-q4_k_m.gguf" in dialog.progress_label.text()
    qtbot.waitUntil(
        lambda: dialog.download is not None and dialog.download.state == "done", timeout=10000
    )
    assert client.called("download_model") == [
        {"repo_id": "someone/Big-GGUF", "file": "big-q4_k_m.gguf"}
    ]
    assert dialog.progress_label.text().startswith("Downloaded someone/Big-GGUF/big-q4_k_m.gguf")
    # Asked again when done: the file now shows as downloaded and can be used.
    qtbot.waitUntil(lambda: len(client.called("recommended_models")) == 2, timeout=5000)


RERANKER = ModelAdvice(
    id="cross-encoder/ms-marco-MiniLM-L-6-v2",
    name="MS MARCO MiniLM-L6 reranker",
    params=22_713_601,
    licence="Apache-2.0",
    description="Orders each question's sources.",
    weight_bytes=90_854_404,
    download_bytes=91_800_000,
    verdict="runs on CPU (int8)",
    verdict_kind="ram",
    offloaded_percent=0,
    missing_bytes=0,
    expected_tokens_per_s=None,
    speed_note="estimate: 20 passages",
    installed=True,
    installed_path="/data/models/cross-encoder--ms-marco-MiniLM-L-6-v2",
    role="reranker",
    seconds_per_question=1.38,
)


def test_a_recommended_reranker_is_chosen_to_rank_the_sources(
    make_window: MakeWindow, qtbot: QtBot
) -> None:
    client = FakeClient(recommended=replace(RECOMMENDED, models=[*RECOMMENDED.models, RERANKER]))
    window = make_window(client)
    dialog = window.models_dialog
    window.model_chooser.models_action.trigger()
    row = len(RECOMMENDED.models)
    qtbot.waitUntil(lambda: dialog.table.rowCount() == row + 1, timeout=5000)
    assert cell(dialog, row, "Expected speed") == "≈ 1.4 s per question"
    assert cell(dialog, row, "On this machine") == "runs on CPU (int8)"
    assert cell(dialog, row, "Download") == "92 MB"
    dialog.table.selectRow(0)
    assert dialog.use_button.text() == "Use this model"
    dialog.table.selectRow(row)
    assert dialog.use_button.text() == "Use to rank sources" and dialog.use_button.isEnabled()
    qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(client.called("set_reranker")) == 1, timeout=5000)
    assert client.called("set_reranker")[0] == {"reranker": RERANKER.installed_path}
    assert client.called("set_model") == []  # a reranker is never the answer model
    # The dialog plans again once the engine says the reranker is in use.
    qtbot.waitUntil(lambda: len(client.called("recommended_models")) == 2, timeout=5000)

    # The Model menu names it and switches it off.
    chooser = window.model_chooser
    qtbot.waitUntil(chooser.ranker_label.isVisible, timeout=5000)
    assert chooser.ranker_label.text() == "Sources ranked by: ms-marco-MiniLM-L-6-v2"
    assert not chooser.rank_action.isChecked()
    chooser.no_ranker_action.trigger()
    qtbot.waitUntil(lambda: len(client.called("set_reranker")) == 2, timeout=5000)
    assert client.called("set_reranker")[1] == {"reranker": None}
    qtbot.waitUntil(lambda: not chooser.ranker_label.isVisible(), timeout=5000)
