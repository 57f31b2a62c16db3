"""Probes: /healthz (the process is up) and /readyz (database reachable, model loaded)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from service.api.deps import StateDep

router = APIRouter(tags=["probes"])


@router.get("/healthz", summary="Liveness: the process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: the database answers and the embedder is loaded")
async def readyz(state: StateDep) -> Any:
    checks: dict[str, str] = {}
    try:
        await state.ping()
        checks["database"] = "ok"
    except Exception as exc:  # reported, not raised: readiness is a status, not an error
        checks["database"] = f"unavailable ({type(exc).__name__})"
    checks["embedder"] = "ok" if state.has_embedder else "loading"
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not_ready", "checks": checks, "embedder": state.embedder.sync.name},
        status_code=200 if ready else 503,
    )
