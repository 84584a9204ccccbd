"""Turn the `database` a case names (a file path or a URL) into a `DatabaseSpec`.

A plain path is relative to the case file's directory (`base_dir`). A URL is read as its driver
reads it (SQLAlchemy conventions): `sqlite:///rel.db` is relative to the current directory,
`sqlite:////abs.db` is absolute; but a case file's own file URL (`duckdb:///rel.duckdb`) is made
absolute against the case file's folder first (`absolute_file_url`), as its plain paths are, so
that a suite finds its database whatever folder pytest is started from. A plain path is a SQLite
or a DuckDB file, told apart by the file's header (SQLite's `SQLite format 3\0`, DuckDB's `DUCK`
at offset 8), else by its extension (`.duckdb`, `.ddb`). The spec's `key` names the database
uniquely, so that two cases naming one database in different spellings share one cached
connection.

A URL whose scheme is none of our own engines' (Snowflake, BigQuery, Trino, SQL Server, ...) goes
to the SQLAlchemy engine. It is checked here, when the spec is made, that SQLAlchemy knows the
dialect and that its driver imports: a URL that can never work fails once, naming what to install,
before any case runs.
"""

from __future__ import annotations

import enum
import functools
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlsplit

from pytest_nl2sql.engines.base import DatabaseMissing


class EngineKind(enum.Enum):
    """The database systems we have an engine for; the value is the sqlglot dialect name of the
    native ones (`SQLALCHEMY` runs every other URL; its dialect is the spec's `dialect`)."""

    SQLITE = "sqlite"
    DUCKDB = "duckdb"
    POSTGRES = "postgres"
    MYSQL = "mysql"
    SQLALCHEMY = "sqlalchemy"


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

# SQLAlchemy dialect name (`Dialect.name`, or a URL scheme) -> sqlglot dialect, where they differ
# or where sqlglot has a dialect of that name. A name sqlglot does not know is sqlglot's generic
# dialect ("").
SQLGLOT_DIALECTS: dict[str, str] = {
    "postgresql": "postgres",
    "postgres": "postgres",
    "cockroachdb": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
    "duckdb": "duckdb",
    "mssql": "tsql",
    "oracle": "oracle",
    "snowflake": "snowflake",
    "bigquery": "bigquery",
    "trino": "trino",
    "presto": "presto",
    "redshift": "redshift",
    "databricks": "databricks",
    "hive": "hive",
    "spark": "spark",
    "sparksql": "spark",
    "clickhouse": "clickhouse",
    "clickhousedb": "clickhouse",
    "awsathena": "athena",
    "athena": "athena",
    "teradatasql": "teradata",
    "teradata": "teradata",
    "doris": "doris",
    "starrocks": "starrocks",
    "singlestoredb": "singlestore",
    "singlestore": "singlestore",
    "drill": "drill",
    "druid": "druid",
    "risingwave": "risingwave",
    "materialize": "materialize",
    "exasol": "exasol",
    "dremio": "dremio",
}

# The package that brings a SQLAlchemy dialect (or its default driver), for the install hint.
DIALECT_PACKAGES: dict[str, str] = {
    "snowflake": "snowflake-sqlalchemy",
    "bigquery": "sqlalchemy-bigquery",
    "trino": "trino[sqlalchemy]",
    "presto": "pyhive[presto]",
    "redshift": "sqlalchemy-redshift",
    "databricks": "databricks-sqlalchemy",
    "hive": "pyhive[hive]",
    "clickhouse": "clickhouse-sqlalchemy",
    "awsathena": "pyathena[sqlalchemy]",
    "oracle": "oracledb",
    "mssql": "pyodbc (or pymssql)",
    "cockroachdb": "sqlalchemy-cockroachdb",
    "teradatasql": "teradatasqlalchemy",
}

SQLALCHEMY_HINT = "install pytest-nl2sql[sqlalchemy] and the dialect's package"


def sqlglot_dialect(name: str) -> str:
    """The sqlglot dialect of a SQLAlchemy dialect name: mapped, or the name itself when sqlglot
    knows it, else sqlglot's generic dialect ("")."""
    lowered = name.lower()
    if lowered in SQLGLOT_DIALECTS:
        return SQLGLOT_DIALECTS[lowered]
    from sqlglot.dialects.dialect import Dialect

    try:
        Dialect.get_or_raise(lowered)
    except ValueError:
        return ""
    return lowered


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
    url: str | None = None  # server engines: the URL with any `+driver` removed (SQLAlchemy: as written)
    server: ServerAddress | None = None
    dialect: str = ""  # the sqlglot dialect of the database

    def __post_init__(self) -> None:
        if not self.dialect and self.kind is not EngineKind.SQLALCHEMY:
            object.__setattr__(self, "dialect", self.kind.value)

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

    def label(self) -> str:
        """The database as a URL that names its engine, password masked, for reports:
        `postgresql://user:***@127.0.0.1:5432/db`, `sqlite:////abs/shop.sqlite`."""
        if self.path is not None:
            return f"{self.kind.value}:///{self.path.as_posix()}"
        return _redact(self.url or "")


def looks_like_url(database: str) -> bool:
    """True for `scheme://...`; a Windows drive path (`C:\\x.db`) is not a URL."""
    scheme, sep, _ = database.partition("://")
    return bool(sep) and len(scheme) > 1 and scheme.replace("+", "").replace("-", "").isalnum()


def dialect_of(database: str) -> str:
    """The sqlglot dialect of a database spec, read off its URL scheme (a plain path: the kind of
    file it is, see `file_kind`).

    A scheme of none of our engines is a SQLAlchemy dialect: its own name when known, else the
    name of the dialect SQLAlchemy loads for it (an alias registered by the user)."""
    if not looks_like_url(database):
        return file_kind(Path(database)).value if database.strip() else EngineKind.SQLITE.value
    scheme = database.partition("://")[0].partition("+")[0].lower()
    if scheme in _SCHEMES:
        return _SCHEMES[scheme].value
    if scheme in SQLGLOT_DIALECTS:
        return SQLGLOT_DIALECTS[scheme]
    try:
        return _sqlalchemy_spec(database).dialect
    except DatabaseMissing:
        return EngineKind.SQLITE.value  # as before: the case reports the missing database itself


def parse_database(database: str, base_dir: Path | None = None) -> DatabaseSpec:
    """Parse a case's `database` value; raise `DatabaseMissing` when it cannot name a database."""
    text = database
    if not text.strip():
        raise DatabaseMissing("the case names no database (empty `database`)")
    if not looks_like_url(text):
        path = _resolve(Path(text), base_dir)
        return DatabaseSpec(file_kind(path), path=path)

    parts = urlsplit(text)
    scheme, _, _driver = parts.scheme.lower().partition("+")
    kind = _SCHEMES.get(scheme)
    if kind is None:
        return _sqlalchemy_spec(text)
    if kind in (EngineKind.SQLITE, EngineKind.DUCKDB):
        return DatabaseSpec(kind, path=_file_url_path(kind, text))
    plain = parts._replace(scheme=scheme).geturl()
    return DatabaseSpec(kind, url=plain, server=_server_address(parts))


def _sqlalchemy_spec(text: str) -> DatabaseSpec:
    """A URL of no native engine, for the SQLAlchemy engine: SQLAlchemy must read it, know its
    dialect, and import the dialect's driver, else `DatabaseMissing` says what to install."""
    shown = _redact(text)
    scheme = text.partition("://")[0]
    native = ", ".join(sorted(_SCHEMES))
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError
    except ImportError:
        raise DatabaseMissing(
            f"{shown!r}: a {scheme!r} URL runs through SQLAlchemy, which is not installed"
            f" ({SQLALCHEMY_HINT}; pytest-nl2sql itself runs {native})"
        ) from None
    try:
        url = make_url(text)
    except (ArgumentError, ValueError):
        raise DatabaseMissing(f"cannot read the database URL {shown!r}") from None
    name = url.get_backend_name()
    package = DIALECT_PACKAGES.get(name, "")
    hint = f"{SQLALCHEMY_HINT}" + (f" ({package})" if package else "")
    try:
        dialect_class = url.get_dialect()
    except NoSuchModuleError:
        if name in DIALECT_PACKAGES or name in SQLGLOT_DIALECTS:
            raise DatabaseMissing(f"{shown!r}: the SQLAlchemy dialect {name!r} is not installed; {hint}") from None
        raise DatabaseMissing(
            f"unknown database URL scheme {scheme!r} in {shown!r}: neither one of pytest-nl2sql's"
            f" engines ({native}) nor a SQLAlchemy dialect installed here; {hint}"
        ) from None
    except ImportError as error:
        raise DatabaseMissing(f"{shown!r}: the {scheme!r} dialect cannot load ({error}); {hint}") from None
    try:
        dialect_class.import_dbapi()
    except ImportError as error:
        missing = getattr(error, "name", None) or str(error)
        raise DatabaseMissing(
            f"{shown!r}: the {scheme!r} dialect needs its driver {missing!r}, which is not installed; {hint}"
        ) from None
    except Exception:  # noqa: BLE001 - a dialect without a driver to import (a mock): let it open
        pass
    return DatabaseSpec(
        EngineKind.SQLALCHEMY,
        url=text,
        server=_server_address(urlsplit(text)),
        dialect=sqlglot_dialect(getattr(dialect_class, "name", name) or name),
    )


def mask_secrets(message: str, url: str) -> str:
    """`message` with the password of `url` (as written and decoded) replaced by `***`: driver
    errors may quote the URL they were given."""
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    message = message.replace(url, _redact(url))
    if password:
        for secret in {password, unquote(password)}:
            if len(secret) >= 3:  # a one-letter password would mask every such letter
                message = message.replace(secret, "***")
    return message


def _resolve(path: Path, base_dir: Path | None) -> Path:
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return Path(os.path.abspath(path))  # no symlink resolution: messages show what the user wrote


DUCKDB_SUFFIXES = (".duckdb", ".ddb")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_DUCKDB_MAGIC = b"DUCK"  # at offset 8, after a checksum


@functools.lru_cache(maxsize=1024)
def _header(path: str, version: tuple[int, ...]) -> bytes:
    """The first 16 bytes of a regular file (b"" when it cannot be read), kept per version of it
    (device, inode, mode, size, modification time)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(16)
    except OSError:  # unreadable: the engine reports it
        return b""


def file_kind(path: Path) -> EngineKind:
    """Which engine opens a database file named by a plain path: its header says (SQLite's
    `SQLite format 3\\0`, DuckDB's `DUCK` at offset 8); a file without either (not there yet,
    empty, not a database) goes by its extension, `.duckdb` and `.ddb` being DuckDB's, so that the
    error names what was expected."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):  # not there (or not a name): the engine reports it
        found = None
    header = b""
    if found is not None and stat.S_ISREG(found.st_mode):  # a regular file only: opening a FIFO would block
        # asked for every case at collection, of a few files: read once per version of the file
        header = _header(os.fspath(path), (found.st_dev, found.st_ino, found.st_mode, found.st_size, found.st_mtime_ns))
    if header.startswith(_SQLITE_MAGIC):
        return EngineKind.SQLITE
    if header[8:12] == _DUCKDB_MAGIC:
        return EngineKind.DUCKDB
    return EngineKind.DUCKDB if path.suffix.lower() in DUCKDB_SUFFIXES else EngineKind.SQLITE


def absolute_file_url(url: str, base_dir: Path) -> str:
    """A `sqlite:///`/`duckdb:///` URL whose relative path is made relative to `base_dir` (the case
    file's folder), as an absolute URL; any other URL as it is."""
    scheme, sep, rest = url.partition("://")
    if _SCHEMES.get(scheme.lower().partition("+")[0]) not in (EngineKind.SQLITE, EngineKind.DUCKDB):
        return url
    path, mark, query = rest.partition("?")
    if not path.startswith("/") or path.startswith("//"):
        return url  # absolute (`sqlite:////abs.db`), or a host the parser refuses itself
    raw = unquote(path[1:])
    if raw in _IN_MEMORY or Path(raw).is_absolute():
        return url
    absolute = _resolve(Path(raw), base_dir)
    return f"{scheme}{sep}/{quote(absolute.as_posix(), safe='/')}{mark}{query}"


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


def redact(url: str) -> str:
    """The URL with its password replaced by `***`, for messages and reports."""
    return _redact(url)


def _redact(url: str) -> str:
    """The URL with its password replaced by `***`, for messages and reports."""
    try:
        parts = urlsplit(url)
        password = parts.password
        port = parts.port
    except ValueError:  # an unreadable port or netloc: hide everything between :// and @
        scheme, sep, rest = url.partition("://")
        user, at, host = rest.rpartition("@")
        return f"{scheme}{sep}{user.partition(':')[0]}:***@{host}" if at else url
    if password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{user}:***@{host}" + (f":{port}" if port else "")
    return parts._replace(netloc=netloc).geturl()
