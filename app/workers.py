"""One worker process of `serve --workers N`.

Apart from the composition root (app.main), whose imports (the MCP SDK, every tool, SQLAlchemy) take seconds of
CPU: uvicorn's supervisor pickles `WorkerApp` into each spawned process, where unpickling imports this module
before the worker answers the supervisor's health pings; the heavy imports run later, inside the factory call, while
the ping thread already answers.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.config import Settings

if TYPE_CHECKING:
    from starlette.types import ASGIApp


@dataclass(frozen=True)
class WorkerApp:
    """The app factory of one worker of `serve --workers N`: pickled into each spawned process by uvicorn's
    supervisor and called there, so every worker has its own logging, database pool, embedder and jobs loop (the
    jobs and the backfill run once across workers under their advisory locks; the rate limit's buckets live in
    PostgreSQL)."""

    settings: Settings
    url: str
    log_level: str
    log_format: str
    log_libraries: bool
    parent_pid: int  # the supervisor's

    def __call__(self) -> ASGIApp:
        import signal

        from app.observability import configure_logging

        configure_logging(self.log_level, self.log_format, libraries=self.log_libraries)
        # Ctrl-C reaches the whole process group: the parent alone answers it, stopping the workers by SIGTERM
        # (graceful), then the embedded database. A worker that also took SIGINT would re-raise it after its
        # shutdown and end in a KeyboardInterrupt traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _stop_with_parent(self.parent_pid)
        from app.main import build_context, create_http_app

        return create_http_app(self.settings, build_context(self.settings, self.url), first_run=False)


def _stop_with_parent(parent_pid: int) -> None:
    """A worker whose parent was killed (SIGKILL, OOM) gets SIGTERM, instead of serving on without a supervisor
    and holding its database connections (Linux; elsewhere the worker outlives such a parent). A parent that died
    while this worker was still starting is seen here: the worker does not start."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    set_parent_death_signal = 1  # PR_SET_PDEATHSIG, <linux/prctl.h>
    ctypes.CDLL(None, use_errno=True).prctl(set_parent_death_signal, signal.SIGTERM)
    if os.getppid() != parent_pid:
        raise SystemExit(f"serve worker {os.getpid()}: its parent {parent_pid} is gone")
