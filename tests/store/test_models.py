"""store/models.py: the schema's own rules. Every table carries ``org_id`` and every primary
and unique key starts with it, so the store distributes by org on Citus as it is (a unique
index may lead with another column only on a reference table, which Citus copies whole:
an org's name, a cookie's hash looked up before the org is known); constraints are named by the naming convention (Alembic's autogenerate and
``alembic check`` compare names); the embedding column is as wide as the model."""

from __future__ import annotations

from sqlalchemy import Index, PrimaryKeyConstraint, UniqueConstraint

from service.embedding.fake import FakeEmbedder
from service.store.distribution import REFERENCE_TABLES
from service.store.models import EMBEDDING_DIMS, Base, Memory


def test_every_table_has_org_id_leading_each_key() -> None:
    bad = []
    for table in Base.metadata.sorted_tables:
        if "org_id" not in table.c:
            bad.append(f"{table.name}: no org_id")
            continue
        keys: list[tuple[str, list[str]]] = []
        for constraint in table.constraints:
            if isinstance(constraint, PrimaryKeyConstraint | UniqueConstraint):
                keys.append((str(constraint.name), [c.name for c in constraint.columns]))
        for index in table.indexes:
            if isinstance(index, Index) and index.unique and table.name not in REFERENCE_TABLES:
                keys.append((str(index.name), [c.name for c in index.columns]))
        bad += [f"{table.name}.{name}: {cols}" for name, cols in keys if cols[:1] != ["org_id"]]
    assert bad == []
    assert set(REFERENCE_TABLES) <= set(Base.metadata.tables)


def test_constraints_follow_the_naming_convention() -> None:
    for table in Base.metadata.sorted_tables:
        assert table.primary_key.name == f"pk_{table.name}"
        for fk in table.foreign_key_constraints:
            assert str(fk.name).startswith(f"fk_{table.name}_"), fk.name
    assert {fk.name for fk in Memory.__table__.foreign_key_constraints} >= {
        "fk_memories_org_id_orgs"
    }


def test_the_embedding_column_is_as_wide_as_the_model() -> None:
    assert Memory.__table__.c.embedding.type.dim == EMBEDDING_DIMS == FakeEmbedder().dims
