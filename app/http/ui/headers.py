"""What every /ui response carries, and how the console's static assets are served.

Security headers are set here once, for every response of the console's app — pages, refusals, error pages,
redirects and assets alike — so no handler has to remember them. Static assets get versioned URLs (`asset_url`:
the file's content hash in `?v=`), cached for a year when the version is the current one and revalidated by
their ETag otherwise, and gzip-compressed when the browser accepts it (Cytoscape.js: 436 kB, ~140 kB gzipped).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from urllib.parse import parse_qs

from starlette.datastructures import MutableHeaders
from starlette.middleware.gzip import GZipMiddleware
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Only the console's own stylesheets and scripts (no inline script, no eval), never framed.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
STATIC_PREFIX = "/ui/static/"
# A versioned URL names one content for good; an unversioned or stale one is revalidated (ETag) on every use.
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
GZIP_LEVEL = 6  # a quarter of level 9's CPU for ~1 % more bytes; a versioned asset is fetched once anyway


class SecurityHeaders:
    """Sets SECURITY_HEADERS on every response that does not set its own value."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, with_headers)


class StaticAssets:
    """The static directory, compressed, with the Cache-Control its URL's version earns."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.app = GZipMiddleware(StaticFiles(directory=str(directory)), minimum_size=1024, compresslevel=GZIP_LEVEL)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = str(scope.get("path", "")).removeprefix(STATIC_PREFIX).lstrip("/")
        version = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("v", [""])[0]
        current = asset_version(self.directory, name)
        cache = IMMUTABLE if version and current and version == current else REVALIDATE

        async def with_cache(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] in (200, 304):
                MutableHeaders(scope=message)["Cache-Control"] = cache
            await send(message)

        await self.app(scope, receive, with_cache)


def asset_url(directory: Path, name: str) -> str:
    """The versioned URL of a static file (templates call it as `asset("console.css")`)."""
    version = asset_version(directory, name)
    return f"{STATIC_PREFIX}{name}?v={version}" if version else f"{STATIC_PREFIX}{name}"


@lru_cache(maxsize=64)
def _hash(path: Path, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def asset_version(directory: Path, name: str) -> str:
    """The first 16 hex digits of the file's SHA-256 ('' for no such file), hashed again only when it changes."""
    path = (directory / name).resolve()
    if not path.is_relative_to(directory.resolve()) or not path.is_file():
        return ""
    stat = path.stat()
    return _hash(path, stat.st_size, stat.st_mtime_ns)
