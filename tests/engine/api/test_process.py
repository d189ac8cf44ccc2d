"""`python -m engine --listen 0.0.0.0`: a loud warning, still token-only, the Host
check adapted; SIGTERM stops it cleanly (exit 0, endpoint file removed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from engine.paths import resolve_paths


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
