"""Turn the `database` a case names (a file path or a URL) into a `DatabaseSpec`.

A plain path is relative to the case file's directory (`base_dir`). A URL is read as its driver
reads it (SQLAlchemy conventions): `sqlite:///rel.db` is relative to the current directory,
`sqlite:////abs.db` is absolute. The spec's `key` names the database uniquely, so that two cases
naming one database in different spellings share one cached connection.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

from pytest_nl2sql.engines.base import DatabaseMissing


class EngineKind(enum.Enum):
    """The database systems we have an engine for; the value is the sqlglot dialect name."""

    SQLITE = "sqlite"
    DUCKDB = "duckdb"
    POSTGRES = "postgres"
    MYSQL = "mysql"


# URL scheme (before any `+driver`) -> engine. SQLAlchemy spellings included.
_SCHEMES: dict[str, EngineKind] = {
    "sqlite": EngineKind.SQLITE,
    "duckdb": EngineKind.DUCKDB,
    "postgresql": EngineKind.POSTGRES,
    "postgres": EngineKind.POSTGRES,
    "mysql": EngineKind.MYSQL,
    "mariadb": EngineKind.MYSQL,
}

_IN_MEMORY = {"", ":memory:"}


@dataclass(frozen=True)
class ServerAddress:
    """Connection parameters of a database server, parsed from its URL."""

    host: str | None
    port: int | None
    user: str | None
    password: str | None
    database: str | None
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class DatabaseSpec:
    """Where one database lives: a file (`path`) or a server (`url` / `server`)."""

    kind: EngineKind
    path: Path | None = None  # file engines: absolute, resolved path
    url: str | None = None  # server engines: the URL with any `+driver` removed
    server: ServerAddress | None = None

    @property
    def key(self) -> str:
        """A name that is equal for two specs iff they name the same database."""
        if self.path is not None:
            return f"{self.kind.value}:{self.path}"
        return f"{self.kind.value}:{self.url}"

    def describe(self) -> str:
        """The database as shown in messages: a path, or the URL without its password."""
        if self.path is not None:
            return str(self.path)
        return _redact(self.url or "")


def looks_like_url(database: str) -> bool:
    """True for `scheme://...`; a Windows drive path (`C:\\x.db`) is not a URL."""
    scheme, sep, _ = database.partition("://")
    return bool(sep) and len(scheme) > 1 and scheme.replace("+", "").replace("-", "").isalnum()


def dialect_of(database: str) -> str:
    """The sqlglot dialect of a database spec, read off its URL scheme (a plain path is SQLite)."""
    if not looks_like_url(database):
        return EngineKind.SQLITE.value
    scheme = database.partition("://")[0].partition("+")[0].lower()
    return _SCHEMES.get(scheme, EngineKind.SQLITE).value


def parse_database(database: str, base_dir: Path | None = None) -> DatabaseSpec:
    """Parse a case's `database` value; raise `DatabaseMissing` when it cannot name a database."""
    text = database
    if not text.strip():
        raise DatabaseMissing("the case names no database (empty `database`)")
    if not looks_like_url(text):
        return DatabaseSpec(EngineKind.SQLITE, path=_resolve(Path(text), base_dir))

    parts = urlsplit(text)
    scheme, _, _driver = parts.scheme.lower().partition("+")
    kind = _SCHEMES.get(scheme)
    if kind is None:
        known = ", ".join(sorted(_SCHEMES))
        raise DatabaseMissing(
            f"unsupported database URL scheme {parts.scheme!r} in {_redact(text)!r}: "
            f"pytest-nl2sql runs {known}"
        )
    if kind in (EngineKind.SQLITE, EngineKind.DUCKDB):
        return DatabaseSpec(kind, path=_file_url_path(kind, text))
    plain = parts._replace(scheme=scheme).geturl()
    return DatabaseSpec(kind, url=plain, server=_server_address(parts))


def _resolve(path: Path, base_dir: Path | None) -> Path:
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return Path(os.path.abspath(path))  # no symlink resolution: messages show what the user wrote


def _file_url_path(kind: EngineKind, url: str) -> Path:
    """`sqlite:///rel.db` (relative to the current directory) and `sqlite:////abs.db`."""
    _, _, rest = url.partition("://")
    # SQLAlchemy: everything after the third slash up to `?` is the path, unquoted as written.
    rest = rest.split("?", 1)[0]
    if rest.startswith("/"):
        rest = rest[1:]
    elif rest:  # sqlite://host/path: SQLAlchemy refuses a host for file databases
        raise DatabaseMissing(f"{kind.value} URL {url!r} must look like {kind.value}:///path")
    raw = unquote(rest)
    if raw in _IN_MEMORY:
        raise DatabaseMissing(
            f"{url!r} names an in-memory database, which has no tables to query; name a file"
        )
    return _resolve(Path(raw), None)


def _server_address(parts: SplitResult) -> ServerAddress:
    try:
        port = parts.port
    except ValueError as error:
        raise DatabaseMissing(f"bad port in {_redact(parts.geturl())!r}: {error}") from None
    database = unquote(parts.path.lstrip("/")) or None
    return ServerAddress(
        host=unquote(parts.hostname) if parts.hostname else None,
        port=port,
        user=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
        database=database,
        options=tuple(parse_qsl(parts.query)),
    )


def _redact(url: str) -> str:
    """The URL with its password replaced by `***`, for messages and reports."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()
