"""schemathesis against the OpenAPI document the engine serves: no request it
generates gets a server error, and every response matches the declared schema."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.engine import RunningEngine

# Operations left out: shutdown would end the run; adding or removing watched
# folders with generated paths could grant a real folder of this machine; choosing a
# model or embeddings server (or listing its models) would send requests to generated
# addresses.
EXCLUDED = (
    *("--exclude-path", "/v1/shutdown", "--exclude-path", "/v1/folders"),
    *("--exclude-path", "/v1/settings/model-server", "--exclude-path", "/v1/model-server/models"),
    *("--exclude-path", "/v1/settings/embedder-server"),
)
# Left out as checks: `positive_data_acceptance` (a schema-valid request the engine
# refuses on its meaning, e.g. a search for blanks, is a correct 400).
SKIPPED_CHECKS = "positive_data_acceptance"


# The quick form fuzzes every operation with valid and invalid data (72 requests);
# the slow form adds the coverage phase, each parameter's boundary and wrong-typed
# values (about 1,100 requests: 74 s of a busy machine against 11 s).
@pytest.mark.parametrize(
    "phases", ["fuzzing", pytest.param("coverage,fuzzing", marks=pytest.mark.slow)]
)
def test_no_server_errors_and_responses_match_the_schema(
    api_engine: RunningEngine, tmp_path: Path, phases: str
) -> None:
    endpoint = api_engine.client.endpoint
    cli = Path(sys.executable).with_name("schemathesis")
    started = time.monotonic()
    try:
        result = subprocess.run(
            [
                str(cli),
                "run",
                f"{endpoint.base_url}/openapi.json",
                "--header",
                f"Authorization: Bearer {endpoint.token}",
                *EXCLUDED,
                "--exclude-checks",
                SKIPPED_CHECKS,
                "--phases",
                phases,
                "--max-examples",
                "3",
                # One worker: with two, hypothesis parses lambdas' source in two
                # threads at once, which CPython 3.11's ast.parse does not survive.
                "--workers",
                "1",
                "--seed",
                "7",
                "--request-timeout",
                "60",
                "--no-shrink",
            ],
            cwd=tmp_path,  # its report folder
            env={**os.environ, "SCHEMATHESIS_TELEMETRY": "false", "NO_COLOR": "1"},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        api_engine.client.set_server_settings(allowed_origins=[], keep_engine_running=False)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "Server error" not in result.stdout
    print(f"schemathesis: {elapsed:.1f} s")
    assert api_engine.client.status().documents == 2  # the library came through intact
