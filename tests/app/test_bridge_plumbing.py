"""EngineOp through the bridge: the call off the GUI thread, then success, failure
or progress on it; nothing reaches Qt once the bridge is closed."""

from __future__ import annotations

import threading

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_plumbing import EngineOp, LatestReads, Report
from app.engine_bridge import EngineBridge
from engine.service.client import EngineClient
from tests.app.fake_client import FakeClient


def connected_bridge(qtbot: QtBot, client: FakeClient) -> EngineBridge:
    bridge = EngineBridge(client_factory=lambda: client, health_interval_ms=60_000)
    bridge.connect_engine()
    qtbot.waitUntil(lambda: bridge.connected, timeout=5000)
    return bridge


def test_a_call_runs_off_the_gui_thread_and_its_result_comes_back_on_it(qtbot: QtBot) -> None:
    bridge = connected_bridge(qtbot, FakeClient())
    gui = threading.get_ident()
    ran_on: list[int] = []
    results: list[tuple[int, str]] = []

    def call(client: EngineClient) -> str:
        ran_on.append(threading.get_ident())
        return client.status().version

    assert bridge.run(
        EngineOp(what="x", call=call, success=lambda v: results.append((threading.get_ident(), v)))
    )
    qtbot.waitUntil(lambda: bool(results), timeout=5000)
    assert ran_on != [gui] and results == [(gui, "0-test")]
    bridge.close()


def test_a_follow_reports_progress_in_order_then_succeeds(qtbot: QtBot) -> None:
    bridge = connected_bridge(qtbot, FakeClient())
    seen: list[object] = []

    def follow(_client: EngineClient, report: Report) -> str:
        for step in range(3):
            assert report(step)
        return "done"

    bridge.run(
        EngineOp(what="x", follow=follow, progress=seen.append, success=lambda v: seen.append(v))
    )
    qtbot.waitUntil(lambda: "done" in seen, timeout=5000)
    assert seen == [0, 1, 2, "done"]
    bridge.close()


def test_a_failure_goes_to_the_op_or_is_reported_never_swallowed(qtbot: QtBot) -> None:
    bridge = connected_bridge(qtbot, FakeClient(fail={"hardware": RuntimeError("no disk")}))
    errors: list[tuple[str, str]] = []
    bridge.sig_error.connect(lambda what, why: errors.append((what, why)))
    failures: list[BaseException] = []
    bridge.run(EngineOp(what="Reading the hardware", call=lambda c: c.hardware()))
    bridge.run(EngineOp(what="y", call=lambda c: c.hardware(), failure=failures.append))
    qtbot.waitUntil(lambda: bool(errors) and bool(failures), timeout=5000)
    assert errors == [("Reading the hardware", "RuntimeError: no disk")]
    assert str(failures[0]) == "no disk"
    bridge.close()


def test_nothing_runs_without_an_engine_and_nothing_comes_back_after_close(
    qtbot: QtBot,
) -> None:
    bridge = EngineBridge(client_factory=FakeClient)
    errors: list[tuple[str, str]] = []
    bridge.sig_error.connect(lambda what, why: errors.append((what, why)))
    assert not bridge.run(EngineOp(what="Listing", call=lambda c: c.documents()))
    assert errors == [("Listing", "The engine is not connected yet.")]

    bridge = connected_bridge(qtbot, FakeClient())
    release = threading.Event()
    reported: list[bool] = []
    landed: list[object] = []

    def follow(_client: EngineClient, report: Report) -> int:
        release.wait(5)
        reported.append(report(1))
        return 2

    bridge.run(EngineOp(what="x", follow=follow, progress=landed.append, success=landed.append))
    bridge.close()
    release.set()
    qtbot.waitUntil(lambda: bool(reported), timeout=5000)
    qtbot.wait(100)
    assert reported == [False] and landed == []


def test_an_op_has_a_call_or_a_follow() -> None:
    with pytest.raises(ValueError):
        EngineOp(what="x")
    with pytest.raises(ValueError):
        EngineOp(what="x", call=lambda c: 1, follow=lambda c, r: 1)


class _SlowFirstListing(FakeClient):
    """The first documents() call is slow and answers what was there before a folder
    went; the second answers at once with the folder gone."""

    def __init__(self) -> None:
        super().__init__()
        self.listings = 0
        self.release = threading.Event()

    def documents(self):  # type: ignore[no-untyped-def]
        self.listings += 1
        if self.listings == 1:
            self.release.wait(5)
            return ["stale"]
        return []


def test_a_slow_old_listing_never_overwrites_a_newer_one(qtbot: QtBot) -> None:
    client = _SlowFirstListing()
    bridge = connected_bridge(qtbot, client)
    shown: list[object] = []
    bridge.sig_documents.connect(shown.append)
    # The connection's own listing is the slow one, from before the removal.
    qtbot.waitUntil(lambda: client.listings == 1, timeout=5000)
    bridge.refresh_library()  # after it: fast
    qtbot.waitUntil(lambda: shown == [[]], timeout=5000)
    client.release.set()
    qtbot.wait(300)  # the old answer arrives now, and is dropped
    assert shown == [[]]
    bridge.close()


def test_latest_reads_apply_in_order_of_asking() -> None:
    reads = LatestReads()
    first, second = reads.ticket(), reads.ticket()
    assert reads.fresh(kind="documents", ticket=second)
    assert not reads.fresh(kind="documents", ticket=first)
    assert reads.fresh(kind="folders", ticket=first)  # each kind on its own
