"""GET /v1/whoami: what the presented key is allowed to do."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import CallerDep, StateDep
from service.schemas.common import WhoAmI

router = APIRouter(prefix="/v1", tags=["keys"])


@router.get("/whoami", response_model=WhoAmI, summary="The calling key's org, scopes and limits")
async def whoami(caller: CallerDep, state: StateDep) -> WhoAmI:
    return WhoAmI(
        org_id=str(caller.org_id),
        key_id=str(caller.key_id),
        key_name=caller.key_name,
        scopes=sorted(caller.scopes),
        projects=list(caller.projects),
        namespace_prefixes=list(caller.namespace_prefixes),
        max_batch_items=state.settings.max_batch_items,
        max_body_bytes=state.settings.max_body_bytes,
    )
