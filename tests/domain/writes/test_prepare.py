"""What the model embeds for a memory: the name only when it adds words the content lacks."""

from service.domain.writes.prepare import derive_name, document_text


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
