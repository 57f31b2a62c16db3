"""What the lifecycle commands need to work on the database directly: an engine, the
embedder, and an operator caller of one org (the CLI has the database's own credentials, so
it acts with every right in that org, as `ctxpack audit` does), on ``open_resources``."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

from service.config import Settings
from service.domain.auth import Caller
from service.resources import Resources, open_resources

# Audit rows written by the CLI carry this key id (no key was presented) and this caller.
OPERATOR_KEY_ID = uuid.UUID(int=0)
OPERATOR_NAME = "ctxpack-cli"


LocalResources = Resources
"""The lifecycle commands run on the process's typed resources, like every command."""


@contextlib.asynccontextmanager
async def open_local(settings: Settings, *, with_embedder: bool = True) -> AsyncIterator[Resources]:
    """The resources for one command (``open_resources``): the model only when asked for,
    no revocation listener (a one-shot command has no use for it)."""
    async with open_resources(settings, load_embedder=with_embedder, listen=False) as resources:
        yield resources


def operator(org_id: uuid.UUID) -> Caller:
    """Every right in ``org_id``, for the CLI."""
    return Caller(
        org_id=org_id,
        key_id=OPERATOR_KEY_ID,
        key_name=OPERATOR_NAME,
        scopes=frozenset({"read", "write", "admin"}),
    )


def model_id(settings: Settings) -> str:
    """The embedding model's name as an export header records it (without loading it)."""
    if settings.embedder in ("minilm", "minilm-torch"):
        return "all-MiniLM-L6-v2"
    if settings.embedder == "openai":
        return f"openai:{settings.embedder_model}"
    return str(settings.embedder)
