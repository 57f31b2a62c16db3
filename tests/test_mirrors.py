"""Tests mirror modules: ``service/<path>/<module>.py`` is tested in
``tests/<path>/test_<module>.py``, so a newcomer finds a module's tests where the module is.

``UNMIRRORED`` lists the modules that have no such file yet. It only shrinks: a module
that gains its mirror must leave the list (the test says so), and a new module must come
with its mirror. Scenario suites that cut across modules live under ``tests/e2e/``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What is left, and why: the real model's embedder is tested end to end with the model
# (tests/api/test_memories_model.py, tests/embedding/test_onnx.py); the erase receipt's models
# hold no rule; the wake statement is tested through its rules (tests/domain/test_wake.py,
# test_wake_plan.py) while its SQL shares store/retrieval.py's parts.
UNMIRRORED = {
    "service/embedding/minilm.py",
    "service/schemas/lifecycle.py",
    "service/store/wake.py",
}


def _mirror(module: Path) -> Path:
    rel = module.relative_to(ROOT / "service")
    return ROOT / "tests" / rel.parent / f"test_{rel.stem}.py"


def _modules() -> list[Path]:
    return [
        p for p in sorted((ROOT / "service").rglob("*.py"))
        if p.name not in ("__init__.py", "__main__.py")
    ]


def test_every_new_module_has_its_mirror() -> None:
    missing = [
        str(p.relative_to(ROOT)) for p in _modules()
        if not _mirror(p).exists() and str(p.relative_to(ROOT)) not in UNMIRRORED
    ]
    assert missing == [], "add tests/<same path>/test_<module>.py for these"


def test_the_allow_list_only_shrinks() -> None:
    modules = {str(p.relative_to(ROOT)): p for p in _modules()}
    stale = sorted(m for m in UNMIRRORED if m not in modules or _mirror(modules[m]).exists())
    assert stale == [], "these have a mirror now (or are gone): take them off UNMIRRORED"
