"""Progress of a long command on stderr: a tqdm bar (rate, ETA) on a terminal, plain lines
every few seconds otherwise (logs and CI keep a readable record)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

PLAIN_EVERY_SECONDS = 5.0


class Progress:
    """``with Progress("ingest", total) as p: p.update(n)``."""

    def __init__(
        self,
        label: str,
        total: int | None,
        *,
        unit: str = "item",
        stream: TextIO | None = None,
        tty: bool | None = None,
        every_seconds: float = PLAIN_EVERY_SECONDS,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.every = every_seconds
        self.done = 0
        self.started = time.monotonic()
        self._last_line = self.started
        self._bar: Any = None

    def __enter__(self) -> Progress:
        if self.tty:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total, desc=self.label, unit=self.unit, file=self.stream,
                dynamic_ncols=True, smoothing=0.1,
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
        else:
            self._line(final=True)

    def set_total(self, total: int | None) -> None:
        self.total = total
        if self._bar is not None:
            self._bar.reset(total=total)

    def update(self, n: int = 1, **postfix: Any) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            if postfix:
                self._bar.set_postfix(postfix, refresh=False)
            return
        now = time.monotonic()
        if now - self._last_line >= self.every:
            self._last_line = now
            self._line()

    def _line(self, final: bool = False) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.done / elapsed
        parts = [f"{self.label}: {self.done}"]
        if self.total:
            parts[0] += f"/{self.total} ({100 * self.done / self.total:.0f}%)"
        parts.append(f"{rate:.1f} {self.unit}/s")
        if self.total and not final and rate > 0:
            parts.append(f"ETA {max(self.total - self.done, 0) / rate:.0f}s")
        if final:
            parts.append(f"in {elapsed:.1f}s")
        self.stream.write(", ".join(parts) + "\n")
        self.stream.flush()
