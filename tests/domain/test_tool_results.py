"""The tool-result envelope's rules (domain/tool_results.py): redact first, then trim; cuts
never inside a placeholder, an escape or a UTF-8 sequence; JSON stays JSON; text keeps its
head, tail and errors; never over the budget; linear work."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from service.domain.redaction import PLACEHOLDER_RE
from service.domain.tool_results import (
    build_envelope,
    first_n,
    project,
    safe_cut,
)
from service.embedding.fake import FakeEmbedder
from service.embedding.minilm import count_tokens as wordpiece
from service.errors import InvalidInput

fake = FakeEmbedder().count_tokens
COUNTERS = [pytest.param(fake, id="fake"), pytest.param(wordpiece, id="wordpiece")]

GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


def log_lines(n: int, start: int = 0) -> list[str]:
    return [
        f"2026-11-26 10:{(i // 60) % 60:02d}:{i % 60:02d} INFO worker-{i % 7} handled request "
        f"{i} in {i % 97} ms path=/api/v1/items/{i}"
        for i in range(start, start + n)
    ]


def pytest_log() -> tuple[str, str]:
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.3",
        "collected 400 items",
        "",
    ]
    lines += [f"tests/test_mod{i // 40}.py::test_case_{i} PASSED" for i in range(200)]
    failing = "tests/test_mod5.py::test_refund_rounds_half_even FAILED"
    lines.append(failing)
    lines += [f"tests/test_mod{i // 40}.py::test_case_{i} PASSED" for i in range(201, 400)]
    lines += [
        "",
        "=================================== FAILURES ===================================",
        "________________________ test_refund_rounds_half_even _________________________",
        "    def test_refund_rounds_half_even():",
        ">       assert refund(Decimal('2.675')) == Decimal('2.68')",
        "E       AssertionError: assert Decimal('2.67') == Decimal('2.68')",
        "tests/test_mod5.py:88: AssertionError",
        "=========================== short test summary info ============================",
        "FAILED tests/test_mod5.py::test_refund_rounds_half_even - AssertionError",
        "======================= 1 failed, 399 passed in 12.31s ========================",
    ]
    return "\n".join(lines), "E       AssertionError: assert Decimal('2.67') == Decimal('2.68')"


# --- redact first, then trim ---------------------------------------------------------------------


@pytest.mark.parametrize("count", COUNTERS)
def test_a_secret_at_the_cut_never_leaks_a_piece(count: Callable[[str], int]) -> None:
    """The seed trimmed first: a cut through a token left a prefix the patterns no longer
    matched. Whatever the budget, no 8-character piece of the secret survives here."""
    words = " ".join(f"word{i}" for i in range(400))
    text = f"{words} token={GITHUB} and then {BEARER} more text {words}"
    pieces = {GITHUB[i : i + 8] for i in range(len(GITHUB) - 8)} | {
        BEARER[7 + i : 15 + i] for i in range(len(BEARER) - 15)
    }
    for budget in range(32, 500, 9):
        for strategy in ("first_n", "text", "auto"):
            env = build_envelope(text, budget, count, strategy=strategy)  # type: ignore[arg-type]
            assert env.tokens_after <= budget
            assert not [p for p in pieces if p in env.content], (budget, strategy)
            assert env.redactions


def test_redaction_reaches_json_keys_and_values_at_any_depth() -> None:
    body = {"data": [{"env": [{"name": "DB_PASSWORD", "value": "s3cr3t-Pa55"}], GITHUB: 1}]}
    env = build_envelope(body, 800, fake)
    assert "s3cr3t" not in env.content and GITHUB not in env.content
    assert env.redactions == {"PASSWORD": 1, "GITHUB_TOKEN": 1}
    json.loads(env.content)


# --- where a cut may fall ------------------------------------------------------------------------


def test_safe_cut_never_lands_inside_a_placeholder_or_an_escape() -> None:
    text = 'a [PASSWORD:REDACTED] b \\"q\\" c \\u00e9 d \\\\ e [TOKEN:REDACTED]'
    spans = [m.span() for m in PLACEHOLDER_RE.finditer(text)]
    for pos in range(len(text) + 1):
        cut = safe_cut(text, pos)
        assert cut <= pos
        assert not any(s < cut < e for s, e in spans), pos
        head = text[:cut]
        trailing = len(head) - len(head.rstrip("\\"))
        assert trailing % 2 == 0, pos  # never between a backslash and what it escapes
        assert not re.search(r"\\u[0-9a-fA-F]{0,3}$", head) or head.endswith("\\\\u"), pos


@pytest.mark.parametrize("count", COUNTERS)
def test_first_n_keeps_whole_placeholders_and_characters(count: Callable[[str], int]) -> None:
    text = " ".join(f"日本語のログ 🚀 password={i}Xy9!qq" for i in range(300))
    for budget in (32, 57, 100, 233):
        env = build_envelope(text, budget, count, strategy="first_n")
        kept = env.content.split("\n[… ", 1)[0]
        redacted = build_envelope(text, 10_000, count, strategy="first_n").content
        assert redacted.startswith(kept)
        leftovers = PLACEHOLDER_RE.sub("", kept)
        assert "REDACTED" not in leftovers and not re.search(r"\[[A-Z_]+(:[A-Z]*)?$", leftovers)
        env.content.encode("utf-8")  # whole code points: always encodable


def test_first_n_never_exceeds_and_says_what_it_dropped() -> None:
    text = "x " * 5000
    out, dropped = first_n(text, 40, fake)
    assert fake(out) <= 40
    assert dropped > 9000
    assert "more characters dropped" in out


# --- text ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", COUNTERS)
def test_text_keeps_head_tail_and_error_lines_with_markers(count: Callable[[str], int]) -> None:
    lines = log_lines(1500)
    lines[700:700] = [
        "Traceback (most recent call last):",
        '  File "/srv/app/main.py", line 40, in <module>',
        "    serve()",
        '  File "/srv/app/db.py", line 12, in connect',
        "    raise ConnectionError('db.internal:5432 refused')",
        "ConnectionError: db.internal:5432 refused",
    ]
    lines.append("process exited with code 3")
    text = "\n".join(lines)
    env = build_envelope(text, 800, count)
    assert env.strategy == "text"
    assert env.tokens_after <= 800
    assert env.tokens_before > 10 * 800
    out = env.content.split("\n")
    assert out[0] == lines[0]
    assert out[-1] == "process exited with code 3"
    assert "ConnectionError: db.internal:5432 refused" in out
    assert "    raise ConnectionError('db.internal:5432 refused')" in out
    assert "Traceback (most recent call last):" in out
    assert any(re.fullmatch(r"\[… \d+ lines dropped …\]", line) for line in out)
    [cut] = [c for c in env.cuts if c.what == "lines"]
    kept = sum(1 for line in out if not line.startswith("[… "))
    assert cut.dropped == len(lines) - kept


def test_pytest_and_pip_failures_survive_800_tokens() -> None:
    text, answer = pytest_log()
    env = build_envelope(text, 800, wordpiece)
    assert answer in env.content
    assert "FAILED tests/test_mod5.py::test_refund_rounds_half_even - AssertionError" in env.content
    pip = "\n".join(
        [f"Collecting pkg{i}==1.{i}.0" for i in range(300)]
        + ["ERROR: Could not find a version that satisfies the requirement torch==9.9.9"]
        + [f"  Downloading pkg{i}-1.{i}.0-py3-none-any.whl (12 kB)" for i in range(300)]
    )
    env = build_envelope(pip, 800, wordpiece)
    assert (
        "ERROR: Could not find a version that satisfies the requirement torch==9.9.9" in env.content
    )


def test_repeated_error_lines_do_not_crowd_out_the_rest() -> None:
    lines = log_lines(200)
    lines[10:10] = [f"ERROR retrying connection attempt {i}" for i in range(500)]
    lines.insert(600, "FATAL disk /var/lib/postgres is full")
    env = build_envelope("\n".join(lines), 300, fake)
    assert "FATAL disk /var/lib/postgres is full" in env.content
    assert env.content.count("ERROR retrying") <= 2


def test_first_n_is_a_fallback_not_the_default() -> None:
    text, answer = pytest_log()
    assert build_envelope(text, 200, fake).strategy == "text"
    naive = build_envelope(text, 200, fake, strategy="first_n")
    assert naive.strategy == "first_n" and answer not in naive.content


# --- JSON ----------------------------------------------------------------------------------------


def pods(n: int = 80, crashed: int = 57) -> dict[str, Any]:
    items = [
        {
            "metadata": {"name": f"web-{i}", "namespace": "prod", "labels": {"app": "web"}},
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": "web",
                        "ready": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-11-26T09:00:00Z"}},
                    }
                ],
            },
        }
        for i in range(n)
    ]
    items[crashed]["status"]["containerStatuses"][0]["state"] = {
        "waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting"}
    }
    return {"apiVersion": "v1", "kind": "List", "items": items}


@pytest.mark.parametrize("count", COUNTERS)
@pytest.mark.parametrize("budget", [32, 60, 150, 400, 800, 3000])
def test_json_stays_json_within_budget(count: Callable[[str], int], budget: int) -> None:
    body = pods()
    body["notes"] = "long text " * 2000
    body["ratio"] = float("nan")
    for strategy in ("auto", "json", "summary"):
        env = build_envelope(body, budget, count, strategy=strategy)  # type: ignore[arg-type]
        assert env.tokens_after <= budget
        assert env.is_json
        json.loads(env.content)
    env = build_envelope(body, budget, count, fields=["items.metadata.name", "kind"])
    assert env.tokens_after <= budget
    json.loads(env.content)


def test_auto_json_shortens_arrays_and_strings_keeps_keys_and_failed_items() -> None:
    body = pods()
    body["description"] = "a very long description " * 100
    env = build_envelope(body, 800, wordpiece)
    out = json.loads(env.content)
    assert list(out) == ["apiVersion", "kind", "items", "description"]
    assert out["items"][0]["metadata"]["name"] == "web-0"
    markers = [i for i in out["items"] if isinstance(i, str)]
    assert markers and all(re.fullmatch(r"\[… \d+ items? dropped\]", m) for m in markers)
    kept = [i for i in out["items"] if isinstance(i, dict)]
    assert sum(int(re.search(r"\d+", m).group()) for m in markers) + len(kept) == 80  # type: ignore[union-attr]
    assert any(i["metadata"]["name"] == "web-57" for i in kept)  # the one in CrashLoopBackOff
    assert re.search(r"… \[\d+ more chars\]$", out["description"])
    assert {c.what for c in env.cuts} >= {"items", "chars"}


def test_fields_keep_nested_paths_map_over_lists_and_report_missing() -> None:
    body = pods(5, crashed=2)
    picked, missing = project(
        body, ["kind", "items.metadata.name", "items.1.status.phase", "nope.x"]
    )
    assert picked["kind"] == "List"
    assert picked["items"][0] == {"status": {"phase": "Running"}}  # index 1 first, then the map
    assert [i["metadata"]["name"] for i in picked["items"][1:]] == [f"web-{i}" for i in range(5)]
    assert missing == ["nope.x"]
    star, _ = project({"a": {"x": 1, "y": {"z": 2}}}, ["a.*"])
    assert star == {"a": {"x": 1, "y": {"z": 2}}}
    env = build_envelope(
        json.dumps(body), 800, fake, fields=["items.status.containerStatuses.state"]
    )
    assert env.strategy == "fields"
    assert "CrashLoopBackOff" in env.content and "web-2" not in env.content


def test_summary_gives_the_shape() -> None:
    env = build_envelope(pods(), 800, fake, strategy="summary")
    out = json.loads(env.content)
    assert out["items"][0] == "80 items"
    assert out["items"][1]["metadata"]["name"] == "string(5)"
    text, _ = pytest_log()
    shape = json.loads(build_envelope(text, 800, fake, strategy="summary").content)
    assert shape["type"] == "text" and shape["error_lines"] >= 2


def test_non_finite_numbers_become_strings() -> None:
    env = build_envelope(
        {"a": float("nan"), "b": [float("inf"), float("-inf")], "c": 1.5}, 100, fake
    )
    assert json.loads(env.content) == {"a": "NaN", "b": ["Infinity", "-Infinity"], "c": 1.5}
    env = build_envelope('{"loss": NaN, "best": Infinity}', 100, fake)
    assert json.loads(env.content) == {"loss": "NaN", "best": "Infinity"}


def test_fields_misused_is_422_naming_fields() -> None:
    with pytest.raises(InvalidInput) as err:
        build_envelope({"a": 1}, 100, fake, strategy="fields")
    assert err.value.details["field"] == "fields"
    with pytest.raises(InvalidInput):
        build_envelope({"a": 1}, 100, fake, strategy="summary", fields=["a"])


def test_a_text_that_is_not_json_falls_back_to_text() -> None:
    env = build_envelope("{not json at all\n" * 300, 100, fake, strategy="json")
    assert env.strategy == "text" and not env.is_json


# --- bounded -------------------------------------------------------------------------------------


def test_work_is_linear_in_the_input() -> None:
    """The tokenizer sees at most a few times the input, whatever its size: the text strategy
    counts only the lines it considers, and the JSON levels only what they keep."""

    def counted(text_or_value: Any, **kw: Any) -> int:
        seen = [0]

        def count(text: str) -> int:
            seen[0] += len(text)
            return fake(text)

        build_envelope(text_or_value, 800, count, **kw)
        return seen[0]

    small, big = "\n".join(log_lines(2_000)), "\n".join(log_lines(40_000))
    assert counted(big) <= 2 * len(big) + 200_000
    assert counted(big) - len(big) <= 4 * (counted(small) - len(small)) + 50_000
    wide = {"rows": [{"id": i, "name": f"row {i}", "tags": ["a", "b"]} for i in range(40_000)]}
    size = len(json.dumps(wide))
    assert counted(wide) <= 2 * size + 200_000


def test_an_exited_container_is_kept_among_many() -> None:
    """Regression: ``Exited (137)`` ends in a parenthesis, where a trailing word boundary
    never matched, so the dead container was dropped with the others."""
    rows = [{"Names": f"svc_{i}", "Status": f"Up {i % 50 + 2} minutes"} for i in range(200)]
    rows[143]["Status"] = "Exited (137) 20 minutes ago"
    env = build_envelope(rows, 300, wordpiece)
    assert "svc_143" in env.content and "Exited (137)" in env.content
    json.loads(env.content)


def test_the_first_and_last_line_survive_a_tight_budget() -> None:
    command = (
        "$ curl -s -H 'Authorization: Bearer " + GITHUB + "' https://ci.internal/api/jobs/812/log"
    )
    text = "\n".join([command, *log_lines(500), "exit status 3"])
    env = build_envelope(text, 120, wordpiece)
    out = env.content.split("\n")
    assert out[0].startswith("$ curl -s -H 'Authorization: Bearer [GITHUB_TOKEN:REDACTED]'")
    assert out[-1] == "exit status 3"
