"""Recommended models with this machine's verdicts, and hub downloads on request.

Nothing here reaches the network except `POST /v1/models/download`, which a person
starts by hand; when the person asked for offline (engine/service/offline.py) the engine
refuses it rather than try.
The paths share /v1/models with the OpenAI-compatible routes, so their refusals come
in OpenAI's error shape like everything under that prefix (see openai_routes).
"""

from __future__ import annotations

import re

from fastapi import APIRouter, HTTPException

from engine.service.api.bodies import REPO_ID, DownloadBody
from engine.service.api.openai_routes import ERROR_RESPONSES
from engine.service.core import Engine
from engine.service.models.catalogue import download_folder, recommended
from engine.service.models.download import Downloads
from engine.wire import ModelDownload, OpenAIError, RecommendedModels

_REPO_ID = re.compile(REPO_ID)


def models_router(*, engine: Engine) -> APIRouter:
    router = APIRouter(tags=["models"])
    downloads = Downloads(
        folder_of=lambda repo_id: download_folder(repo_id=repo_id, paths=engine.paths)
    )
    not_found = {**ERROR_RESPONSES, 404: {"model": OpenAIError, "description": "No such download"}}

    @router.get("/v1/models/recommended", response_model=RecommendedModels)
    def recommended_models() -> RecommendedModels:
        store = engine.planner_store()
        return recommended(
            paths=engine.paths,
            chosen_model=engine.settings.model,
            store=store,
            chosen_reranker=engine.settings.reranker,
        )

    @router.post(
        "/v1/models/download",
        response_model=ModelDownload,
        responses={
            **ERROR_RESPONSES,
            409: {"model": OpenAIError, "description": "The engine runs offline"},
        },
    )
    def start_download(body: DownloadBody) -> ModelDownload:
        if not _REPO_ID.match(body.repo_id) or ".." in body.repo_id:
            raise HTTPException(
                status_code=400, detail=f"not a Hugging Face repo id: {body.repo_id}"
            )
        if engine.environ.downloads_refused:
            raise HTTPException(
                status_code=409,
                detail="The engine runs offline (RAGDOLL_OFFLINE or HF_HUB_OFFLINE was set "
                "when it started): nothing is downloaded.",
            )
        return downloads.start(repo_id=body.repo_id, file=body.file)

    @router.get("/v1/models/downloads", response_model=dict[str, list[ModelDownload]])
    def list_downloads() -> dict[str, list[ModelDownload]]:
        return {"downloads": downloads.all()}

    @router.get(
        "/v1/models/downloads/{download_id}", response_model=ModelDownload, responses=not_found
    )
    def download_progress(download_id: str) -> ModelDownload:
        job = downloads.get(download_id)
        if job is None:
            raise HTTPException(status_code=404, detail=f"no download {download_id}")
        return job.snapshot()

    @router.post(
        "/v1/models/downloads/{download_id}/cancel",
        response_model=ModelDownload,
        responses=not_found,
    )
    def cancel_download(download_id: str) -> ModelDownload:
        job = downloads.get(download_id)
        if job is None:
            raise HTTPException(status_code=404, detail=f"no download {download_id}")
        return job.cancel()

    return router
