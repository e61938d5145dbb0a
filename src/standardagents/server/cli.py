"""``standardagents tokens``: create, list and revoke API tokens for the server.

A token's secret is printed once, at creation; the store keeps only its SHA-256.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ..store import open_store
from ..store.base import Store, UserRecord
from ..store.sql import DATABASE_URL_ENV

__all__ = ["tokens_app"]

T = TypeVar("T")

tokens_app = typer.Typer(help="Manage API tokens for the HTTP server.", no_args_is_help=True)

ProjectOpt = Annotated[Path, typer.Option("--project", "-p", help="The project folder (its database is used).")]
DbOpt = Annotated[str | None, typer.Option("--database-url", help="A database URL instead of the project's SQLite file.")]


def _with_store(project: Path, database_url: str | None, work: Callable[[Store], Awaitable[T]]) -> T:
    """Run ``work`` on the project's store. A folder that is not a project is refused (its
    tokens would go to a new, empty database the server never reads); errors are one line."""
    from ..exceptions import StandardAgentsError

    root = project.resolve()
    if not database_url and not os.environ.get(DATABASE_URL_ENV) and not (root / "agents").is_dir():
        typer.echo(f"error: {project} is not an agents project (there is no agents/ folder): "
                   "pass --project PROJECT, the folder you serve", err=True)
        raise typer.Exit(1)

    async def main() -> T:
        store = open_store(database_url, project_dir=root)
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except StandardAgentsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


async def _find_user(store: Store, user: str) -> UserRecord | None:
    found = await store.get_user(user)
    if found is not None:
        return found
    for candidate in await store.list_users():
        if candidate.name == user or candidate.email == user:
            return candidate
    return None


def _make_admin(conn: Any, user_id: str) -> None:
    """Give an existing user the admin role (one statement, in the store's transaction)."""
    from sqlalchemy import update

    from ..store.schema import users

    conn.execute(update(users).where(users.c.id == user_id).values(is_admin=True))


@tokens_app.command("create")
def create(user: Annotated[str, typer.Argument(help="User id or name; created when it does not exist.")],
           name: Annotated[str, typer.Option("--name", help="A label for the token.")] = "cli",
           admin: Annotated[bool, typer.Option(
               "--admin", help="The user is an admin (sees every thread): a new user is created as one, "
                               "an existing one is made one.")] = False,
           project: ProjectOpt = Path("."), database_url: DbOpt = None) -> None:
    """Create a token for USER and print it (the only time it is shown)."""

    async def work(store: Store) -> tuple[UserRecord, Any, str, bool, bool]:
        record = await _find_user(store, user)
        created = record is None
        promoted = False
        if record is None:
            record = await store.create_user(user, is_admin=admin, user_id=user)
        elif admin and not record.is_admin:
            await store._run(_make_admin, record.id)  # type: ignore[attr-defined]  # the SQL store's one-transaction runner
            record.is_admin = promoted = True
        token, secret = await store.create_api_token(record.id, name)
        return record, token, secret, created, promoted

    record, token, secret, created, promoted = _with_store(project, database_url, work)
    if created:
        typer.echo(f"created user {record.id}{' (admin)' if record.is_admin else ''}", err=True)
    elif promoted:
        typer.echo(f"user {record.id} is now an admin", err=True)
    typer.echo(f"token {token.id} for {record.id}{' (admin)' if record.is_admin else ''} "
               "(store it now, it is not shown again):", err=True)
    typer.echo(secret)


@tokens_app.command("list")
def list_tokens(user: Annotated[str | None, typer.Option("--user", help="Only this user's tokens.")] = None,
                project: ProjectOpt = Path("."), database_url: DbOpt = None) -> None:
    """List tokens (id, user, name, prefix, state); secrets are never shown."""

    async def work(store: Store) -> list[Any]:
        user_id = None
        if user is not None:
            record = await _find_user(store, user)
            if record is None:
                raise typer.BadParameter(f"unknown user {user!r}", param_hint="--user")
            user_id = record.id
        return await store.list_api_tokens(user_id)

    tokens = _with_store(project, database_url, work)
    if not tokens:
        typer.echo("no tokens")
        return
    for token in tokens:
        state = "revoked" if token.revoked_at else "active"
        typer.echo(f"{token.id}\t{token.user_id}\t{token.name}\t{token.prefix}…\t{state}")


@tokens_app.command("revoke")
def revoke(token_id: Annotated[str, typer.Argument(help="The token id (from 'tokens list').")],
           project: ProjectOpt = Path("."), database_url: DbOpt = None) -> None:
    """Revoke a token; requests using it are refused from now on."""
    if not _with_store(project, database_url, lambda store: store.revoke_api_token(token_id)):
        typer.echo(f"no active token {token_id!r}", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked {token_id}")
