"""What a one-off command prints (issue 22): its result only, unless asked (`-v`); never a log line in between."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.db.engine import Database


def synaptomind(database_url: str, data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SYNAPTO_")}
    env |= {"SYNAPTO_DATABASE_URL": database_url, "SYNAPTO_DATA_DIR": str(data_dir)}
    command = [sys.executable, "-m", "app", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_one_off_commands_print_their_result_only_unless_verbose(
    database_url: str, clean_database: Database, tmp_path: Path
) -> None:
    created = synaptomind(database_url, tmp_path, "token", "create", "--user", "quiet", "--role", "writer")
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("smt_") and created.stdout.count("\n") == 1
    [notice] = created.stderr.splitlines()
    assert notice.startswith("token created for user 'quiet' (role writer); expires "), created.stderr

    listed = synaptomind(database_url, tmp_path, "token", "list")
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    assert "quiet" in listed.stdout

    refused = synaptomind(database_url, tmp_path, "user", "role", "nobody", "reader")
    assert refused.returncode != 0
    assert len(refused.stderr.splitlines()) == 1 and "nobody" in refused.stderr, refused.stderr

    # Asked for (-v before or after the command): the log lines are back, at the configured level (INFO), the
    # libraries' too (alembic's migration check); not a terminal, so JSON lines.
    for verbose in (["-v", "token", "list"], ["token", "list", "--verbose"]):
        chatty = synaptomind(database_url, tmp_path, *verbose)
        assert chatty.returncode == 0 and chatty.stdout == listed.stdout
        assert '"level": "INFO", "logger": "alembic' in chatty.stderr, chatty.stderr
