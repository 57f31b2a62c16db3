"""The README's client and integration examples, extracted from README.md and run verbatim
against a live ``ctxpack serve`` (CTXPACK_URL / CTXPACK_API_KEY set, a fresh org per example)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SNIPPET = re.compile(r"<!-- snippet: ([\w-]+) -->\n```python\n(.*?)```", re.S)


def snippets() -> dict[str, str]:
    return dict(SNIPPET.findall(README.read_text()))


def test_the_readme_has_each_example() -> None:
    assert set(snippets()) == {
        "client", "langchain", "langgraph-store", "openai-agents", "tool-results"
    }


# What each example must print: evidence it talked to the server.
EXPECT = {
    "client": ["3 ['created', 'created', 'created']", "refused: ['", "6543", "staging-db"],
    "langchain": ["created memory ", "in alice", "TMPDIR=/var/tmp"],
    "langgraph-store": ["{'via': 'chat', 'content': 'Alice edits code in the Neovim editor.'}", "['editor']",
                        "created memory ", "Tuesdays and Thursdays"],
    "openai-agents": ["'context'", "'remember'", "Feature flags are read at request time"],
    "tool-results": ["['GITHUB_TOKEN']", "[GITHUB_TOKEN:REDACTED]", "ERROR ledger refused the write",
                     "call_2 True"],
}


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_readme_example_runs_verbatim(name: str, ctxpack_env: str) -> None:
    code = snippets()[name]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README.md:{name}", "exec"), {"__name__": "__readme__"})
    printed = out.getvalue()
    for expected in EXPECT[name]:
        assert expected in printed, f"{expected!r} not in:\n{printed}"
