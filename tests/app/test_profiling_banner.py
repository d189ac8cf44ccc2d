from app.hardware.profiling_banner import ProfilingBanner
from engine.wire import ProfilingStatus


def test_the_banner_shows_a_run_and_asks_once_to_skip(qtbot) -> None:  # type: ignore[no-untyped-def]
    banner = ProfilingBanner()
    qtbot.addWidget(banner)
    banner.show_status(ProfilingStatus(state="idle"))
    assert banner.isHidden()
    banner.show_status(
        ProfilingStatus(
            state="running",
            message="timing generation: batch of 2",
            fraction=0.25,
            reason="first start",
        )
    )
    assert not banner.isHidden()
    assert "first start" in banner.label.text() and "batch of 2" in banner.label.text()
    assert banner.progress.value() == 25
    with qtbot.waitSignal(banner.sig_skip, timeout=1000):
        banner.skip_button.click()
    assert not banner.skip_button.isEnabled()
    banner.show_status(ProfilingStatus(state="skipped"))
    assert banner.isHidden()
