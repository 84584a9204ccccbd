"""Reading the files cases name within a size cap, and writing the files a run leaves behind
(reports, baselines) safely.

`read_text_capped` reads a case, predictions or gold file only when it is at most
`MAX_INPUT_BYTES`: a file of gigabytes is refused, naming it, before it is held in memory.

`atomic_open` writes to a temporary file in the target's directory, flushes it to disk and
renames it over the target in one step, so a run killed mid-write (kill -9, a full disk, an
exception in a writer) leaves either the previous file or the new one, never half a file, and
never the temporary file. A replaced file keeps its permission bits; a new one gets the usual
`0666 & ~umask` (0644 typically), as `open()` would create it. Every failure is a
`FileWriteError` (an `OSError`) whose message names the path and says what is wrong.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

MAX_INPUT_BYTES = 256 * 1024 * 1024  # a case, predictions or gold file; Spider's are under 1 MiB


class FileTooLarge(OSError):
    """An input file over `MAX_INPUT_BYTES`; an `OSError`, so readers report it as unreadable."""


def read_text_capped(path: str | os.PathLike[str], limit: int | None = None) -> str:
    """The UTF-8 text of `path`, read only up to one byte past `limit` (`MAX_INPUT_BYTES`): a
    larger file raises `FileTooLarge` (`UnicodeDecodeError` for text that is not UTF-8)."""
    limit = MAX_INPUT_BYTES if limit is None else limit
    chunks: list[bytes] = []
    left = limit + 1  # read in chunks: `read(n)` would reserve n bytes at once
    with open(path, "rb") as handle:
        while left > 0 and (chunk := handle.read(min(left, 1024 * 1024))):
            chunks.append(chunk)
            left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise FileTooLarge(f"{os.fspath(path)} is larger than the {limit:,} bytes an input file may be")
    return data.decode("utf-8")


class FileWriteError(OSError):
    """A file that cannot be written; `str()` is a whole sentence naming the path."""

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None, errno: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errno = errno
        self.filename = os.fspath(path) if path is not None else None

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Any:  # picklable (xdist, multiprocessing) despite the custom __init__
        return type(self), (self.message, self.filename, self.errno)


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike[str],
    mode: str = "w",
    *,
    encoding: str | None = "utf-8",
    errors: str | None = None,
    newline: str | None = None,
    what: str = "file",
    error: type[FileWriteError] = FileWriteError,
) -> Iterator[IO[Any]]:
    """Open `path` for writing (`mode` "w" or "wb"); the file appears only when the block succeeds.

    `what` names the file in messages ("the json report", "the baseline"); `error` is the
    `FileWriteError` subclass raised. An `OSError` in the block is re-raised as `error`; any other
    exception propagates unchanged. Either way the target is untouched and no temporary file is
    left behind. A target that is not a regular file (`/dev/stdout`, a FIFO) is written directly.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes text ('w') or bytes ('wb'), not {mode!r}")
    binary = mode == "wb"
    text_options: dict[str, Any] = {} if binary else {"encoding": encoding, "errors": errors, "newline": newline}
    shown = os.fspath(path)

    def fail(reason: str, cause: OSError | None = None) -> FileWriteError:
        return error(f"cannot write {what} {shown}: {reason}", shown, cause.errno if cause else None)

    target = Path(os.path.realpath(path))  # through a symlink: the link stays, its target is replaced
    try:
        existing = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):  # the latter: a file where a directory should be
        existing = None
    except OSError as e:
        raise fail(_reason(e), e) from e
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise fail("it is a directory; name a file instead")
    if existing is not None and not stat.S_ISREG(existing.st_mode):  # a device or a pipe: no rename
        try:
            with open(target, mode, **text_options) as stream:
                yield stream
        except OSError as e:
            raise fail(_reason(e), e) from e
        return
    if existing is not None and not os.access(target, os.W_OK):
        raise fail("the file is read-only")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        blocking = next((p for p in (target.parent, *target.parent.parents) if p.exists() and not p.is_dir()), None)
        why = f"{blocking} is a file, not a directory" if blocking else _reason(e)
        raise fail(f"cannot create its directory {target.parent}: {why}", e) from e

    temporary, handle = _create_temporary(target, fail)
    try:
        if existing is not None:
            _chmod(handle, temporary, stat.S_IMODE(existing.st_mode))
        with open(handle, mode, closefd=True, **text_options) as stream:
            handle = -1  # the stream owns it now
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException as e:
        if handle != -1:
            with contextlib.suppress(OSError):
                os.close(handle)
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(e, OSError) and not isinstance(e, FileWriteError):
            raise fail(_reason(e), e) from e
        raise
    _fsync_directory(target.parent)


def atomic_write_text(
    path: str | os.PathLike[str],
    text: str,
    *,
    encoding: str = "utf-8",
    errors: str | None = None,
    newline: str | None = "\n",
    what: str = "file",
    error: type[FileWriteError] = FileWriteError,
) -> Path:
    """Write `text` to `path` atomically (see `atomic_open`); returns the path."""
    with atomic_open(path, "w", encoding=encoding, errors=errors, newline=newline, what=what, error=error) as f:
        f.write(text)
    return Path(path)


def _create_temporary(target: Path, fail: Any) -> tuple[str, int]:
    """A new file beside the target, created with mode 0666 so that the umask applies, as it
    does to a file `open()` creates (tempfile.mkstemp would make it 0600)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        temporary = os.path.join(target.parent, f".{target.name[:200]}.{secrets.token_hex(4)}.tmp")
        try:
            return temporary, os.open(temporary, flags, 0o666)
        except FileExistsError:
            continue
        except OSError as e:
            raise fail(f"cannot create a file in {target.parent}: {_reason(e)}", e) from e
    raise fail(f"cannot create a temporary file in {target.parent}")


def _chmod(handle: int, temporary: str, mode: int) -> None:
    if hasattr(os, "fchmod"):
        os.fchmod(handle, mode)
    else:  # Windows: only the read-only bit exists, and the file must stay writable until closed
        os.chmod(temporary, mode | stat.S_IWRITE)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (POSIX); best effort, not possible everywhere."""
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _reason(error: OSError) -> str:
    """The system's words without Python's `[Errno N] ...: 'path'` decoration."""
    return error.strerror or str(error) or type(error).__name__
