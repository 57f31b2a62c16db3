"""Run an erase in a process of its own that stops dead in the middle of the transaction
(after memories, edges and artifacts are deleted, before the keys), for test_erase_crash.py.

    python -m tests.lifecycle.erase_worker URL ORG_ID NAMESPACE MARKER
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.erase import erase_namespace
from service.store.database import create_engine, make_sessionmaker
from service.store.lifecycle import LifecycleRepository
from tests.conftest import make_settings


async def main(url: str, org_id: str, namespace: str, marker: Path) -> None:
    async def stall(self: Any, *args: Any) -> list[str]:
        marker.write_text("in the middle")
        time.sleep(600)  # blocks the loop: the process is killed here
        return []

    LifecycleRepository.delete_keys_within = stall  # type: ignore[method-assign]
    engine = create_engine(url, make_settings(url))
    caller = Caller(uuid.UUID(org_id), uuid.uuid4(), "crash", frozenset({"write"}))
    async with make_sessionmaker(engine)() as session:
        await erase_namespace(session, caller, namespace, AuditContext("erase", caller))
        await session.commit()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
