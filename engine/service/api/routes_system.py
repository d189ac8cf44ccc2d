"""What the engine is doing now, and the API's own settings."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from engine.service.api.bodies import ServerSettingsBody
from engine.service.api.lifecycle import Lifecycle
from engine.service.api.server_settings import ServerSettingsStore
from engine.service.core import Engine
from engine.wire import QueueStatus, ServerSettings


def system_router(
    *, engine: Engine, lifecycle: Lifecycle, settings: ServerSettingsStore
) -> APIRouter:
    router = APIRouter(tags=["system"])

    @router.get("/v1/queue", response_model=QueueStatus)
    def queue() -> QueueStatus:
        return QueueStatus(
            ingest_jobs=engine.ingestion.unfinished(),
            answers_active=lifecycle.answers_active,
            shutting_down=lifecycle.stopping.is_set(),
        )

    @router.get("/v1/settings/server", response_model=ServerSettings)
    def get_server_settings() -> ServerSettings:
        return settings.value

    @router.put(
        "/v1/settings/server",
        response_model=ServerSettings,
        responses={400: {"description": "Not an origin"}},
    )
    def put_server_settings(body: ServerSettingsBody) -> ServerSettings:
        try:
            return settings.update(
                allowed_origins=body.allowed_origins,
                keep_engine_running=body.keep_engine_running,
                api_sources_in_text=body.api_sources_in_text,
            )
        except ValueError as e:
            raise HTTPException(status_code=400, detail=str(e)) from e

    return router
