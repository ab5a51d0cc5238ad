"""A throwaway PostgreSQL server for development and CI: `initdb` in a folder, `pg_ctl`
start on loopback, a read-only role, and the generated databases loaded.

PostgreSQL comes from the OS packages (Debian's postgresql); its programs are looked up on
PATH and in /usr/lib/postgresql/*/bin. PostgreSQL refuses to run as root, so when started by
root the server runs as the `postgres` user (Debian's package makes it) or else `nobody`.
The cluster uses the C locale, so ORDER BY on text sorts as SQLite does (by code point).

The reader role is what environments connect as: it may connect and SELECT, its sessions
are read-only by default, its sorts and recursive queries may spill at most 256 MB to disk
(a setting it cannot change), it has no TEMP privilege, and the functions that signal other
sessions are revoked from it. The superuser's password stays in the folder (mode 600).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from toolgym.envs.sql.generate import Database
from toolgym.errors import ConfigError

READER = "toolgym_reader"
ADMIN = "toolgym_admin"
REVOKED_FUNCTIONS = (
    "pg_terminate_backend(integer, bigint)",
    "pg_cancel_backend(integer)",
    "pg_stat_get_activity(integer)",
    "pg_stat_get_backend_activity(integer)",
)
"""Taken from every role but the admin in each database: signalling other sessions, and
reading other sessions' query text (pg_stat_activity is built on these), where a concurrent
episode would read the gold queries the grader runs."""
REVOKED_VIEWS = ("pg_catalog.pg_stat_activity",)


def pg_program(name: str) -> str:
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None
    )
    if not found:
        raise ConfigError(
            f"PostgreSQL's {name} is not installed; install the OS package (Debian: apt-get "
            "install postgresql)"
        )
    return found


@dataclass(frozen=True)
class PostgresServer:
    """A running throwaway server: its folder, port and the two roles' passwords."""

    folder: Path
    port: int
    admin_password: str
    reader_password: str

    def dsn(self, dbname: str = "postgres", reader: bool = True) -> str:
        user, password = (READER, self.reader_password) if reader else (ADMIN, self.admin_password)
        return f"host=127.0.0.1 port={self.port} user={user} password={password} dbname={dbname}"

    @property
    def reader_dsn(self) -> str:
        """The DSN environments use (any database: the backend sets dbname per db_id)."""
        return self.dsn()

    def stop(self) -> None:
        _as_owner(
            [pg_program("pg_ctl"), "stop", "-D", str(self.folder / "data"), "-m", "fast", "-w"],
            self.folder,
            check=False,
        )

    def load(self, databases: list[Database]) -> None:
        """Create each database (replacing one of the same name) and load its rows."""
        import psycopg

        with psycopg.connect(self.dsn(reader=False), autocommit=True) as admin:
            for db in databases:
                admin.execute(f'DROP DATABASE IF EXISTS "{db.db_id}" WITH (FORCE)')
                admin.execute(f'CREATE DATABASE "{db.db_id}"')
                admin.execute(f'REVOKE ALL ON DATABASE "{db.db_id}" FROM PUBLIC')
                admin.execute(f'GRANT CONNECT ON DATABASE "{db.db_id}" TO {READER}')
        for db in databases:
            with psycopg.connect(self.dsn(db.db_id, reader=False)) as conn:
                for statement in db.ddl("postgres"):
                    conn.execute(statement)
                for table, rows in db.tables().items():
                    with conn.cursor().copy(f"COPY {table} FROM STDIN") as copy:
                        for row in rows:
                            copy.write_row(row)
                conn.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
                conn.execute(f"GRANT USAGE ON SCHEMA public TO {READER}")
                conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {READER}")
                for function in REVOKED_FUNCTIONS:
                    conn.execute(f"REVOKE EXECUTE ON FUNCTION {function} FROM PUBLIC")
                for view in REVOKED_VIEWS:
                    conn.execute(f"REVOKE SELECT ON {view} FROM PUBLIC")
                conn.execute("ANALYZE")


def _owner() -> str | None:
    """The user to run PostgreSQL as when we are root; None when we are not."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise ConfigError("running as root, and neither a 'postgres' nor a 'nobody' user exists")


def _as_owner(
    command: list[str], folder: Path, check: bool = True
) -> subprocess.CompletedProcess[str]:
    owner = _owner()
    program = Path(command[0]).name
    if owner is not None:
        command = ["runuser", "-u", owner, "--", *command]
    run = subprocess.run(command, capture_output=True, text=True, cwd=folder, timeout=120)
    if check and run.returncode != 0:
        raise ConfigError(f"{program} failed: {run.stderr.strip() or run.stdout.strip()}")
    return run


def _check_reachable(folder: Path, owner: str) -> None:
    """Every folder above `folder` must let `owner` pass, or PostgreSQL cannot reach its data."""
    for parent in folder.parents:
        if not parent.stat().st_mode & 0o001:
            raise ConfigError(
                f"PostgreSQL runs as {owner!r} here (it refuses root), and {parent} does not let "
                "other users through; choose a folder under /tmp or another open place"
            )


def start_postgres(folder: str | Path, port: int) -> PostgresServer:
    """Initialise a cluster in `folder` (once) and start it on 127.0.0.1:`port`."""
    folder = Path(folder).resolve()
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--dir {folder} is a file; give a folder for the server's data")
    folder.mkdir(parents=True, exist_ok=True)
    secrets_file = folder / "passwords"
    fresh = not (folder / "data" / "PG_VERSION").is_file()
    if fresh:
        admin, reader = secrets.token_hex(16), secrets.token_hex(16)
        secrets_file.write_text(f"{admin}\n{reader}\n")
        secrets_file.chmod(0o600)
        pwfile = folder / "pwfile"
        pwfile.write_text(admin + "\n")
    admin, reader = secrets_file.read_text().split()
    owner = _owner()
    if owner is not None:
        _check_reachable(folder, owner)
        entry = pwd.getpwnam(owner)
        for path in (folder, *folder.iterdir()):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    if fresh:
        _as_owner(
            [
                pg_program("initdb"),
                "-D",
                str(folder / "data"),
                "-U",
                ADMIN,
                "--pwfile",
                str(folder / "pwfile"),
                "--auth",
                "scram-sha-256",
                "--locale",
                "C",
                "--encoding",
                "UTF8",
            ],
            folder,
        )
        (folder / "pwfile").unlink()
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories='' -c max_connections=200 -c fsync=off"
    log = folder / "server.log"
    start = [pg_program("pg_ctl"), "start", "-D", str(folder / "data"), "-l", str(log), "-w",
             "-t", "60", "-o", options]  # fmt: skip
    try:
        _as_owner(start, folder)
    except ConfigError as exc:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.is_file() else []
        raise ConfigError(
            f"PostgreSQL did not start on port {port}: {' / '.join(tail) or exc}"
        ) from exc
    server = PostgresServer(folder, port, admin, reader)
    _wait_ready(server)
    if fresh:
        _create_reader(server)
    return server


def stop_postgres(folder: str | Path) -> None:
    """Stop the server whose data is in `folder` (one started detached)."""
    folder = Path(folder).resolve()
    if not (folder / "data" / "PG_VERSION").is_file():
        raise ConfigError(f"no PostgreSQL data in {folder}")
    _as_owner(
        [pg_program("pg_ctl"), "stop", "-D", str(folder / "data"), "-m", "fast", "-w"], folder
    )


def _wait_ready(server: PostgresServer, timeout_s: float = 30) -> None:
    import psycopg

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            psycopg.connect(server.dsn(reader=False), connect_timeout=2).close()
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                raise ConfigError(f"PostgreSQL did not start: {exc}") from exc
            time.sleep(0.2)


def _create_reader(server: PostgresServer) -> None:
    import psycopg

    with psycopg.connect(server.dsn(reader=False), autocommit=True) as admin:
        admin.execute(
            f"CREATE ROLE {READER} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
            f"PASSWORD '{server.reader_password}' CONNECTION LIMIT 150"
        )
        admin.execute(f"ALTER ROLE {READER} SET default_transaction_read_only = on")
        admin.execute(f"ALTER ROLE {READER} SET statement_timeout = '30s'")
        admin.execute(f"ALTER ROLE {READER} SET idle_in_transaction_session_timeout = '60s'")
        # superuser-only settings: the role cannot lift them from inside a query
        admin.execute(f"ALTER ROLE {READER} SET temp_file_limit = '256MB'")
        admin.execute("REVOKE ALL ON DATABASE postgres FROM PUBLIC")
