"""Progress of an experiment on stderr, never on stdout (where its tables and JSON go): a bar of
finished/total requests when stderr is a terminal, otherwise one line per finished stage, and
always a final summary line."""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class RequestProgress:
    """``with RequestProgress("vmc experiment tables", total) as p:`` then ``p.done()`` per request
    and ``p.stage("high-high")`` when a stage ends."""

    def __init__(self, prog: str, total: int, tty: bool | None = None) -> None:
        self.prog, self.total, self.finished = prog, total, 0
        self.tty = sys.stderr.isatty() if tty is None else tty
        self._t0 = time.monotonic()
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> RequestProgress:
        self._t0 = time.monotonic()
        if self.tty:
            self._bar = Progress(TextColumn(self.prog), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("requests"), TimeElapsedColumn(),
                                 console=Console(file=sys.stderr), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.prog, total=self.total)
        return self

    def done(self, n: int = 1) -> None:
        self.finished += n
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.finished)

    def _counts(self) -> str:
        return f"{self.finished}/{self.total} requests, {time.monotonic() - self._t0:.1f} s"

    def stage(self, name: str) -> None:
        line = f"{self.prog}: {name} done ({self._counts()})"
        if self._bar is not None:
            self._bar.console.print(line, highlight=False)
        else:
            print(line, file=sys.stderr, flush=True)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
        what = "finished" if kind is None else "stopped"
        print(f"{self.prog}: {what}: {self._counts()}", file=sys.stderr, flush=True)
