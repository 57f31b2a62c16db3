"""What every ``ctxpack`` command shares: the database options, the settings they give, and
the process's resources opened for one command."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from service.config import Settings
from service.errors import InvalidInput

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from service.resources import Resources

T = TypeVar("T")

Handler = Callable[[argparse.Namespace, Settings], int]
"""A command: ``handler(args, settings) -> exit status``, set as the parser's default."""


def db_options(parser: argparse.ArgumentParser) -> None:
    """Add the database options every command takes."""
    parser.add_argument(
        "--data-dir", type=Path, help="embedded Postgres data dir (env CTXPACK_DATA_DIR)"
    )
    parser.add_argument(
        "--database-url",
        help="external PostgreSQL URL instead of the embedded server (env CTXPACK_DATABASE_URL)",
    )


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings of the environment, with the options given in ``args`` over them.

    Raises:
        InvalidInput: a setting's value is refused; names its variable, the value and the
            values it takes (``CTXPACK_QUERY_PRECISION='int4': Input should be 'fp32' or
            'int8'``), one line per refused setting.
    """
    overrides: dict[str, Any] = {}
    for name in ("data_dir", "database_url", "host", "port"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    if getattr(args, "no_migrate", False):
        overrides["migrate_on_start"] = False
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        refused = [
            ("CTXPACK_" + str(e["loc"][0]).upper() if e["loc"] else "settings", e["input"], e["msg"])
            for e in exc.errors()
        ]
        raise InvalidInput(
            refused[0][0],
            "; ".join(f"invalid setting {name}={value!r}: {msg}" for name, value, msg in refused),
        ) from None


def with_resources(
    settings: Settings, fn: Callable[[Resources], Awaitable[T]], **options: Any
) -> T:
    """Run ``fn`` on the process's resources (``open_resources``), opened for a command: no
    model and no revocation listener unless ``options`` ask for them."""
    from service.resources import open_resources

    options.setdefault("load_embedder", False)
    options.setdefault("listen", False)

    async def main() -> T:
        async with open_resources(settings, **options) as resources:
            return await fn(resources)

    return asyncio.run(main())


def in_session(
    settings: Settings, fn: Callable[[AsyncSession], Awaitable[T]], **options: Any
) -> T:
    """Run ``fn`` in one operator unit of work (committed when it returns)."""

    async def run(resources: Resources) -> T:
        async with resources.runner.operator_session() as session:
            return await fn(session)

    return with_resources(settings, run, **options)
