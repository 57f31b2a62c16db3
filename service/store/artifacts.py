"""Artifacts: the JSON body in ``artifacts`` and, beside it, the memory of type ``artifact``
(its summary, embedded) through which context packs reference it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.store.memories import MemoryRepository
from service.store.models import Artifact


class ArtifactRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(
        self,
        *,
        memory: dict[str, Any],
        artifact_id: uuid.UUID,
        body: Any,
        size_bytes: int,
        schema_keys: list[str],
    ) -> None:
        """Insert the artifact's memory (``memory``: its row, planned by
        domain/writes/plan.py) and the artifact beside it (same transaction, same namespace,
        project, name and summary)."""
        await MemoryRepository(self.session).insert_rows([memory], skip=None)
        await self.session.execute(
            insert(Artifact).values(
                org_id=memory["org_id"],
                id=artifact_id,
                namespace=memory["namespace"],
                name=memory["name"],
                summary=memory["content"],
                body=body,
                size_bytes=size_bytes,
                schema_keys=schema_keys,
                project=memory["project"],
                memory_id=memory["id"],
            )
        )

    async def get(
        self,
        org_id: uuid.UUID,
        artifact_id: uuid.UUID,
        *,
        namespaces: Sequence[str] | None,
        prefixes: Sequence[str],
        key_projects: Sequence[str],
        fields: Sequence[str] | None,
    ) -> dict[str, Any] | None:
        """The artifact if the caller may see it, else None (absent and out of reach look
        the same). With ``fields``, only those are extracted, in SQL: the body never leaves
        the database; without, the whole body is returned.

        Args:
            namespaces: when given, the artifact's namespace must be one of them (a reader
                at ``u:s:t`` passes its visible namespaces).
            prefixes: the key's namespace prefixes (empty: unlimited).
            key_projects: the key's projects (empty: unlimited); project-less artifacts are
                visible to every key.
        """
        # An artifact lives as long as its memory: one whose memory expired is gone for every
        # read (the expiry job then deletes its body with the memory).
        where = [
            "a.org_id = :org",
            "a.id = :id",
            # org_id = :org, not = a.org_id: Citus routes the statement to the org's shard
            # only when every part of it names the org (else it fails to plan it).
            "(a.memory_id IS NULL OR NOT EXISTS (SELECT 1 FROM memories m WHERE m.org_id = "
            ":org AND m.id = a.memory_id AND m.expires_at IS NOT NULL "
            "AND m.expires_at <= now()))",
        ]
        params: dict[str, Any] = {"org": org_id, "id": artifact_id}
        if namespaces is not None:
            where.append("a.namespace = ANY(CAST(:namespaces AS text[]))")
            params["namespaces"] = list(namespaces)
        if prefixes:
            where.append(
                "EXISTS (SELECT 1 FROM unnest(CAST(:prefixes AS text[])) p "
                "WHERE a.namespace = p OR starts_with(a.namespace, p || ':'))"
            )
            params["prefixes"] = list(prefixes)
        if key_projects:
            where.append("(a.project IS NULL OR a.project = ANY(CAST(:key_projects AS text[])))")
            params["key_projects"] = list(key_projects)
        if fields is None:
            extracted = "a.body AS body, NULL::jsonb AS fields"
        else:
            # Per declared field: the object's value, or the first object item of a list
            # that has the key. A key holding JSON null is present (its value is null).
            extracted = """NULL::jsonb AS body, (
                SELECT coalesce(jsonb_object_agg(f.name, f.value), '{}'::jsonb)
                FROM (
                    SELECT d.name, CASE jsonb_typeof(a.body)
                        WHEN 'object' THEN a.body -> d.name
                        WHEN 'array' THEN (
                            SELECT e.item -> d.name
                            FROM jsonb_array_elements(a.body) WITH ORDINALITY AS e(item, n)
                            WHERE jsonb_typeof(e.item) = 'object' AND e.item ? d.name
                            ORDER BY e.n LIMIT 1)
                        END AS value
                    FROM unnest(CAST(:fields AS text[])) AS d(name)
                ) f
                WHERE f.value IS NOT NULL) AS fields"""
            params["fields"] = list(fields)
        sql = text(
            f"""
            SELECT a.id, a.namespace, a.name, a.summary, a.size_bytes, a.schema_keys,
                   a.project, a.created_at, {extracted}
            FROM artifacts a
            WHERE {" AND ".join(where)}
            """
        )
        row = (await self.session.execute(sql, params)).mappings().first()
        return dict(row) if row is not None else None

    async def owner(
        self,
        org_id: uuid.UUID,
        artifact_id: uuid.UUID,
        *,
        prefixes: Sequence[str],
        key_projects: Sequence[str],
    ) -> tuple[uuid.UUID | None, str | None] | None:
        """``(memory_id, project)`` of the artifact if the caller may read it, else None."""
        row = await self.get(
            org_id, artifact_id, namespaces=None, prefixes=prefixes,
            key_projects=key_projects, fields=[],
        )
        if row is None:
            return None
        stmt = select(Artifact.memory_id).where(
            Artifact.org_id == org_id, Artifact.id == artifact_id
        )
        return (await self.session.execute(stmt)).scalar_one_or_none(), row["project"]

    async def delete(self, org_id: uuid.UUID, artifact_id: uuid.UUID) -> bool:
        """Delete the artifact's row (its body). Its memory is erased by the caller."""
        result = await self.session.execute(
            delete(Artifact).where(Artifact.org_id == org_id, Artifact.id == artifact_id)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]
