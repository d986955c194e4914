"""The web console (docs/CONSOLE.md): sign-in, memory pages, served at /ui beside /mcp."""

from __future__ import annotations

from app.http.ui.console import ConsoleConfig, ConsoleRouter
from app.http.ui.routes import build_console
from app.http.ui.session import SessionCodec, load_secret

__all__ = ["ConsoleConfig", "ConsoleRouter", "SessionCodec", "build_console", "load_secret"]
