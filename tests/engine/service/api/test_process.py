"""`python -m engine --listen 0.0.0.0`: a loud warning, still token-only, the Host
check adapted; SIGTERM stops it cleanly (exit 0, endpoint file removed), also in
the middle of its warm-up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from engine.paths import resolve_paths
from engine.service.client import EngineClient


def test_network_listening_is_loud_and_still_guarded(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = resolve_paths(env={"RAGDOLL_HOME": str(home)})
    env = {**os.environ, "RAGDOLL_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "engine", "--listen", "0.0.0.0", "--allow-host", "mybox.lan"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not paths.endpoint_file.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the engine did not start"
            time.sleep(0.2)
        url = json.loads(paths.endpoint_file.read_text())["url"]
        assert url.startswith("http://127.0.0.1:")  # local clients still use loopback
        token = paths.token_file.read_text().strip()
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, trust_env=False, timeout=30) as http:
            assert http.get("/v1/status").status_code == 401  # still token-only
            for host, status in (
                ("10.1.2.3:8765", 200),  # an IP literal: what a LAN client sends
                ("mybox.lan:8765", 200),
                ("evil.example", 403),
            ):
                response = http.get("/v1/status", headers={**auth, "Host": host})
                assert response.status_code == status, host
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
        assert "NOT only on this machine" in stderr
        assert not paths.endpoint_file.exists()
        assert token not in stderr and token not in paths.engine_log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.mark.parametrize("stop", ["sigterm", pytest.param("shutdown", marks=pytest.mark.slow)])
def test_a_stop_during_the_warm_up_is_clean(tmp_path: Path, stop: str) -> None:
    """Stopped while the warm-up exports the embedder to ONNX (native code on a
    daemon thread): the process aborted at exit ("terminate called without an
    active exception", exit -6) and the log said "warm-up failed" with a
    traceback. By SIGTERM, and by the window's stop path (POST /v1/shutdown)."""
    home = tmp_path / "home"
    paths = resolve_paths(env={"RAGDOLL_HOME": str(home)})
    # An embedder cache of its own: the export runs in the warm-up, not once for all tests.
    env = {
        **os.environ,
        "RAGDOLL_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "RAGDOLL_EMBEDDER_CACHE": str(tmp_path / "embedders"),
        # The ONNX back-end by name: where bf16 is fast the engine picks bf16
        # weights, which export nothing, and the stop would not meet native code.
        "RAGDOLL_EMBEDDER_BACKEND": "onnx",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "engine"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while "exporting the embedder to ONNX" not in _log(paths.engine_log):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, f"no ONNX export began: {_log(paths.engine_log)}"
            time.sleep(0.05)
        if stop == "sigterm":
            process.send_signal(signal.SIGTERM)
        else:
            with EngineClient.connect(paths=paths, start=False) as client:
                client.shutdown()
        _, stderr = process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    log = _log(paths.engine_log)
    assert "terminate called" not in stderr and "Traceback" not in stderr, stderr
    assert process.returncode == 0, stderr
    assert "warm-up failed" not in log and "Traceback" not in log, log
    assert "engine stopped" in log and not paths.endpoint_file.exists()


def _log(file: Path) -> str:
    return file.read_text(errors="replace") if file.exists() else ""
