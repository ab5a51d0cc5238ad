"""`toolgym sql serve-postgres` and `toolgym sql generate`."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from toolgym.cli.show import console
from toolgym.errors import ConfigError


def _db_ids(databases: str | None, per_domain: int) -> list[str]:
    from toolgym.envs.sql.generate import default_db_ids, parse_db_id

    ids = (
        [d.strip() for d in databases.split(",") if d.strip()]
        if databases
        else default_db_ids(per_domain)
    )
    for db_id in ids:
        parse_db_id(db_id)
    return ids


def serve_postgres_command(
    folder: Path, port: int, databases: str | None, per_domain: int, detach: bool
) -> int:
    """Start a throwaway server with the generated databases; stop it on Ctrl-C unless
    detached."""
    from toolgym.envs.sql.generate import build
    from toolgym.envs.sql.postgres_server import start_postgres

    ids = _db_ids(databases, per_domain)
    server = start_postgres(folder, port)
    try:
        server.load([build(db_id) for db_id in ids])
    except Exception:
        server.stop()
        raise
    console.print(
        f"PostgreSQL on 127.0.0.1:{port}, data in {server.folder}; databases: {', '.join(ids)}"
    )
    console.print(
        f"read-only DSN (use as the env's dsn=...):\n  {server.reader_dsn}", soft_wrap=True
    )
    if detach:
        console.print(
            f"left running; stop it with: toolgym sql stop-postgres --dir {server.folder}"
        )
        return 0
    console.print("Ctrl-C stops it.")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop()
    console.print("stopped")
    return 0


def stop_postgres_command(folder: Path) -> int:
    from toolgym.envs.sql.postgres_server import stop_postgres

    stop_postgres(folder)
    console.print(f"stopped the server in {folder}")
    return 0


def generate_command(
    out: Path, questions: int, databases: str | None, per_domain: int, templates: str | None
) -> int:
    """Write the generated databases as SQLite files and questions as Spider-shaped JSONL."""
    from toolgym.envs.sql.generate import build, write_sqlite
    from toolgym.envs.sql.questions import check_templates, generate_question

    if questions < 0:
        raise ConfigError("--questions must be 0 or more")
    ids = _db_ids(databases, per_domain)
    chosen = check_templates([t.strip() for t in templates.split(",")] if templates else None)
    for db_id in ids:
        write_sqlite(build(db_id), out / "databases" / f"{db_id}.sqlite")
    with (out / "questions.jsonl").open("w") as handle:
        for seed in range(questions):
            handle.write(json.dumps(generate_question(seed, ids, chosen).task()) + "\n")
    console.print(
        f"wrote {len(ids)} databases to {out / 'databases'} and {questions} questions to {out / 'questions.jsonl'}"
    )
    return 0


def sql_serve_postgres(
    dir: Annotated[
        Path, typer.Option("--dir", help="Folder for the server's data (made if missing).")
    ],
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 5432,
    databases: Annotated[
        str | None,
        typer.Option(
            help="Generated database ids, comma-separated (e.g. shop_0,clinic_1; shop_wide_0 "
            "names made-up values)."
        ),
    ] = None,
    per_domain: Annotated[
        int, typer.Option(min=1, help="Without --databases: databases per domain.")
    ] = 2,
    detach: Annotated[bool, typer.Option(help="Leave the server running and return.")] = False,
) -> None:
    """Start a throwaway PostgreSQL on loopback with the generated databases and a read-only role."""

    raise typer.Exit(
        serve_postgres_command(
            folder=dir, port=port, databases=databases, per_domain=per_domain, detach=detach
        )
    )


def sql_stop_postgres(
    dir: Annotated[Path, typer.Option("--dir", help="The folder given to serve-postgres.")],
) -> None:
    """Stop a server started with serve-postgres --detach."""

    raise typer.Exit(stop_postgres_command(folder=dir))


def sql_generate(
    out: Annotated[Path, typer.Option(help="Folder for databases/ and questions.jsonl.")],
    questions: Annotated[int, typer.Option(help="Questions to write.")] = 100,
    databases: Annotated[
        str | None,
        typer.Option(
            help="Generated database ids, comma-separated (shop_wide_0 names made-up values)."
        ),
    ] = None,
    per_domain: Annotated[
        int, typer.Option(min=1, help="Without --databases: databases per domain.")
    ] = 2,
    templates: Annotated[
        str | None, typer.Option(help="Question templates, comma-separated (default: all).")
    ] = None,
) -> None:
    """Write the generated databases (SQLite) and questions (Spider-shaped JSONL)."""

    raise typer.Exit(
        generate_command(
            out=out,
            questions=questions,
            databases=databases,
            per_domain=per_domain,
            templates=templates,
        )
    )
