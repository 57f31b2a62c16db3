"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-22 00:47:15.685139
"""

from collections.abc import Sequence

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # pgvector first: the memories table needs the vector type.
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table('audit_events',
    sa.Column('org_id', sa.UUID(), nullable=False),
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('key_id', sa.UUID(), nullable=True),
    sa.Column('caller', sa.String(length=200), nullable=True),
    sa.Column('action', sa.String(length=32), nullable=False),
    sa.Column('namespace', sa.String(length=200), nullable=True),
    sa.Column('request', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('outcome', sa.String(length=32), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=False),
    sa.Column('memory_ids', sa.ARRAY(sa.UUID()), server_default='{}', nullable=False),
    sa.Column('details', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('redaction_count', sa.Integer(), server_default='0', nullable=False),
    sa.Column('rejection_count', sa.Integer(), server_default='0', nullable=False),
    sa.Column('latency_ms', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('org_id', 'id', name=op.f('pk_audit_events'))
    )
    op.create_index('ix_audit_events_memory_ids', 'audit_events', ['memory_ids'], unique=False, postgresql_using='gin')
    op.create_index('ix_audit_events_org_id_action_created_at', 'audit_events', ['org_id', 'action', 'created_at'], unique=False)
    op.create_index('ix_audit_events_org_id_created_at', 'audit_events', ['org_id', 'created_at'], unique=False)
    op.create_table('orgs',
    sa.Column('org_id', sa.UUID(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('audit_retention_days', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('org_id', name=op.f('pk_orgs')),
    sa.UniqueConstraint('org_id', 'name', name=op.f('uq_orgs_org_id_name'))
    )
    op.create_index('ix_orgs_name', 'orgs', ['name'], unique=True)
    op.create_table('api_keys',
    sa.Column('org_id', sa.UUID(), nullable=False),
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('key_prefix', sa.String(length=16), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('scopes', sa.ARRAY(sa.Text()), nullable=False),
    sa.Column('projects', sa.ARRAY(sa.Text()), server_default='{}', nullable=False),
    sa.Column('namespace_prefixes', sa.ARRAY(sa.Text()), server_default='{}', nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['org_id'], ['orgs.org_id'], name=op.f('fk_api_keys_org_id_orgs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('org_id', 'id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('org_id', 'key_hash', name=op.f('uq_api_keys_org_id_key_hash'))
    )
    op.create_index('ix_api_keys_key_hash', 'api_keys', ['key_hash'], unique=False)
    op.create_table('artifacts',
    sa.Column('org_id', sa.UUID(), nullable=False),
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('namespace', sa.String(length=200), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('summary', sa.Text(), nullable=False),
    sa.Column('body', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('size_bytes', sa.Integer(), nullable=False),
    sa.Column('schema_keys', sa.ARRAY(sa.Text()), nullable=False),
    sa.Column('project', sa.String(length=128), nullable=True),
    sa.Column('memory_id', sa.UUID(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['orgs.org_id'], name=op.f('fk_artifacts_org_id_orgs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('org_id', 'id', name=op.f('pk_artifacts'))
    )
    op.create_index('ix_artifacts_org_id_namespace', 'artifacts', ['org_id', 'namespace'], unique=False)
    op.create_table('memories',
    sa.Column('org_id', sa.UUID(), nullable=False),
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('namespace', sa.String(length=200), nullable=False),
    sa.Column('type', sa.String(length=32), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('embedding', pgvector.sqlalchemy.vector.VECTOR(dim=384), nullable=False),
    sa.Column('tsv', postgresql.TSVECTOR(), sa.Computed("setweight(to_tsvector('english'::regconfig, coalesce(name, '')), 'A') || setweight(to_tsvector('english'::regconfig, coalesce(content, '')), 'B')", persisted=True), nullable=False),
    sa.Column('project', sa.String(length=128), nullable=True),
    sa.Column('domain', sa.String(length=128), nullable=True),
    sa.Column('agent_id', sa.String(length=128), nullable=True),
    sa.Column('tags', sa.ARRAY(sa.Text()), server_default='{}', nullable=False),
    sa.Column('source', sa.Text(), nullable=True),
    sa.Column('origin', sa.String(length=200), nullable=True),
    sa.Column('url', sa.Text(), nullable=True),
    sa.Column('valid_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('superseded_by', sa.UUID(), nullable=True),
    sa.Column('metadata', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['orgs.org_id'], name=op.f('fk_memories_org_id_orgs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('org_id', 'id', name=op.f('pk_memories')),
    sa.UniqueConstraint('org_id', 'namespace', 'content_hash', name=op.f('uq_memories_org_id_namespace_content_hash'))
    )
    op.create_index('ix_memories_embedding_hnsw', 'memories', ['embedding'], unique=False, postgresql_using='hnsw', postgresql_with={'m': 16, 'ef_construction': 64}, postgresql_ops={'embedding': 'vector_cosine_ops'})
    op.create_index('ix_memories_org_id_agent_id', 'memories', ['org_id', 'agent_id'], unique=False)
    op.create_index('ix_memories_org_id_namespace_created_at', 'memories', ['org_id', 'namespace', 'created_at'], unique=False)
    op.create_index('ix_memories_org_id_project', 'memories', ['org_id', 'project'], unique=False)
    op.create_index('ix_memories_tags', 'memories', ['tags'], unique=False, postgresql_using='gin')
    op.create_index('ix_memories_tsv', 'memories', ['tsv'], unique=False, postgresql_using='gin')
    op.create_table('projects',
    sa.Column('org_id', sa.UUID(), nullable=False),
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['orgs.org_id'], name=op.f('fk_projects_org_id_orgs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('org_id', 'id', name=op.f('pk_projects'))
    )
    op.create_table('relations',
    sa.Column('org_id', sa.UUID(), nullable=False),
    sa.Column('id', sa.UUID(), nullable=False),
    sa.Column('source_id', sa.UUID(), nullable=False),
    sa.Column('target_id', sa.UUID(), nullable=False),
    sa.Column('relationship', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['org_id', 'source_id'], ['memories.org_id', 'memories.id'], name=op.f('fk_relations_org_id_source_id_memories'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['org_id', 'target_id'], ['memories.org_id', 'memories.id'], name=op.f('fk_relations_org_id_target_id_memories'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('org_id', 'id', name=op.f('pk_relations')),
    sa.UniqueConstraint('org_id', 'source_id', 'target_id', 'relationship', name=op.f('uq_relations_org_id_source_id_target_id_relationship'))
    )
    op.create_index('ix_relations_org_id_target_id', 'relations', ['org_id', 'target_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_relations_org_id_target_id', table_name='relations')
    op.drop_table('relations')
    op.drop_table('projects')
    op.drop_index('ix_memories_tsv', table_name='memories', postgresql_using='gin')
    op.drop_index('ix_memories_tags', table_name='memories', postgresql_using='gin')
    op.drop_index('ix_memories_org_id_project', table_name='memories')
    op.drop_index('ix_memories_org_id_namespace_created_at', table_name='memories')
    op.drop_index('ix_memories_org_id_agent_id', table_name='memories')
    op.drop_index('ix_memories_embedding_hnsw', table_name='memories', postgresql_using='hnsw', postgresql_with={'m': 16, 'ef_construction': 64}, postgresql_ops={'embedding': 'vector_cosine_ops'})
    op.drop_table('memories')
    op.drop_index('ix_artifacts_org_id_namespace', table_name='artifacts')
    op.drop_table('artifacts')
    op.drop_index('ix_api_keys_key_hash', table_name='api_keys')
    op.drop_table('api_keys')
    op.drop_index('ix_orgs_name', table_name='orgs')
    op.drop_table('orgs')
    op.drop_index('ix_audit_events_org_id_created_at', table_name='audit_events')
    op.drop_index('ix_audit_events_org_id_action_created_at', table_name='audit_events')
    op.drop_index('ix_audit_events_memory_ids', table_name='audit_events', postgresql_using='gin')
    op.drop_table('audit_events')
    op.execute("DROP EXTENSION IF EXISTS vector")
