"""The main window's menu bar: File, Model and Hardware, and the actions the
window enables, checks or hands to tests. The actions only call what they are
given: the menus hold no state of their own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow

from app.library.library_pane import LibraryPane
from app.models_pane.model_chooser import ModelChooser


@dataclass(frozen=True, kw_only=True)
class WindowActions:
    add_folder: QAction
    add_samples: QAction
    new_collection: QAction
    keep_running: QAction  # checkable: the engine's own setting, read back from it
    batch: QAction
    each: QAction
    hardware: QAction
    activity: QAction

    def needing_the_engine(self) -> tuple[QAction, ...]:
        """Disabled until the engine is connected."""
        return (self.add_folder, self.add_samples, self.new_collection, self.keep_running)


def build_menus(
    *,
    window: QMainWindow,
    library: LibraryPane,
    model_chooser: ModelChooser,
    set_keep_running: Callable[[bool], None],
    show_batch: Callable[[], object],
    show_each: Callable[[], object],
    show_hardware: Callable[[], object],
    show_activity: Callable[[], object],
) -> WindowActions:
    file_menu = window.menuBar().addMenu("&File")
    add_folder = QAction("Add &folder…", window)
    add_folder.setShortcut(QKeySequence.StandardKey.Open)
    add_folder.triggered.connect(library.choose_and_add_folder)
    add_samples = QAction("Add the &sample collection", window)
    add_samples.triggered.connect(library.add_sample_collection)
    new_collection = QAction("New &collection…", window)
    new_collection.setToolTip("Name a collection, then choose its first folder")
    new_collection.triggered.connect(library.new_collection)
    keep_running = QAction("&Keep the engine running after quitting", window)
    keep_running.setCheckable(True)
    keep_running.setToolTip(
        "Leave the engine running when this window closes, so that it keeps "
        "watching your folders and serving other programs"
    )
    keep_running.triggered.connect(set_keep_running)
    batch = QAction("&Batch questions…", window)
    batch.setShortcut(QKeySequence("Ctrl+Shift+B"))
    batch.setToolTip("Answer a list of questions together, as a table with sources")
    batch.triggered.connect(lambda: show_batch())
    each = QAction("Ask &each document…", window)
    each.setShortcut(QKeySequence("Ctrl+Shift+E"))
    each.setToolTip("One question of every document of a collection or folder, as a table")
    each.triggered.connect(lambda: show_each())
    quit_action = QAction("&Quit", window)
    quit_action.setShortcut(QKeySequence.StandardKey.Quit)
    quit_action.triggered.connect(window.close)
    file_menu.addAction(add_folder)
    file_menu.addAction(add_samples)
    file_menu.addAction(batch)
    file_menu.addAction(each)
    file_menu.addAction(new_collection)
    file_menu.addSeparator()
    file_menu.addAction(keep_running)
    file_menu.addSeparator()
    file_menu.addAction(quit_action)

    model_menu = window.menuBar().addMenu("&Model")
    model_menu.addAction(model_chooser.models_action)
    model_menu.addAction(model_chooser.choose_action)
    model_menu.addAction(model_chooser.choose_gguf_action)
    model_menu.addAction(model_chooser.server_action)
    model_menu.addAction(model_chooser.extractive_action)
    for action in model_chooser.ranking_actions():
        model_menu.addAction(action)
    model_menu.addSeparator()
    for action in model_chooser.embedder_actions():
        model_menu.addAction(action)

    hardware_menu = window.menuBar().addMenu("&Hardware")
    hardware = QAction("Show &hardware and placement…", window)
    hardware.triggered.connect(lambda: show_hardware())
    hardware_menu.addAction(hardware)
    activity = QAction("Show &activity: queues, batches, latency…", window)
    activity.triggered.connect(lambda: show_activity())
    hardware_menu.addAction(activity)
    return WindowActions(
        add_folder=add_folder,
        add_samples=add_samples,
        new_collection=new_collection,
        keep_running=keep_running,
        batch=batch,
        each=each,
        hardware=hardware,
        activity=activity,
    )
