"""What the model embeds for a memory: the name only when it adds words the content lacks."""

import pytest

from service.config import Settings
from service.domain.write_pipeline import WritePipeline
from service.domain.writes.prepare import derive_name, document_text, prepare_update
from service.errors import GateRejected


def test_derived_name_is_not_embedded_twice() -> None:
    content = "We pin psycopg to 3.2 because 3.3 breaks COPY with pgvector. See OPS-12."
    name = derive_name(content)
    assert name == "We pin psycopg to 3.2 because 3.3 breaks COPY with pgvector"
    assert document_text(name, content) == content


def test_cut_name_with_ellipsis_is_a_prefix_too() -> None:
    content = "When the nightly export job " + "runs long " * 20 + "it overlaps the backup."
    name = derive_name(content)
    assert name.endswith("…")
    assert document_text(name, content) == content


def test_whitespace_in_content_does_not_defeat_the_prefix_check() -> None:
    content = "Deploys   go\tthrough the   staging gate first.\nThen prod."
    assert document_text(derive_name(content), content) == content


def test_an_explicit_name_with_its_own_words_is_embedded_over_the_content() -> None:
    content = "Use the read replica for reports; the primary is sized for writes."
    assert document_text("Reporting database", content) == f"Reporting database\n{content}"
    assert document_text("", content) == content


def test_an_oversize_patch_is_refused_not_ignored() -> None:
    """Oversize content comes out of the pipeline without text; a PATCH of it once answered
    200 and kept the old content."""
    pipeline = WritePipeline.for_settings(Settings())
    with pytest.raises(GateRejected) as raised:
        prepare_update({"content": "word " * 10_000}, "episode", "n", "old", pipeline)
    assert [r["code"] for r in raised.value.reasons] == ["oversize"]
