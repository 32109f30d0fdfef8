"""Files the commands write (``rerender --out``, ``tune --out``, ``view --export``):
never over what is not ours, never half-written, one writer at a time.

``OutputFile(path, kind=…, ours=…)`` checks a target before any work starts:

* a target that exists must be a regular file (a directory, a character device such as
  ``/dev/full``, a FIFO or a socket is refused whatever ``force`` says) that ``ours``
  recognises *by its content* as a file this command wrote before; anything else is
  refused unless ``force``.  A symbolic link is refused unless ``force`` (which then
  replaces the link, never the file it points to);
* its folder must exist and take new files: the lock file beside the target
  (``.NAME.lock``) is made and locked then, so a second writer of the same target is
  refused at once, naming the holder, instead of interleaving with the first.

The content goes to a temporary file beside the target (``.NAME.PID.tmp``, same
filesystem), is synced, and is renamed over the target (``commit``): a reader, a crash
or a full disk sees the old file or the new one, never a mix.  Every ``OSError`` is a
one-line ``CtxrulesError`` naming the file and saying what was (not) replaced.

``checked_dir(path)`` is the same check for a folder of outputs (``tune --out``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .errors import CtxrulesError

__all__ = ["OutputFile", "checked_dir", "io_error", "kind_of"]

#: Recognises a file of ours by its content: called with the target's path.
Recognise = Callable[[Path], bool]


def kind_of(mode: int) -> str:
    """What a file of mode ``mode`` (``os.lstat``) is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a regular file"


def io_error(
    exc: OSError, path: str | os.PathLike[str], doing: str, *, what: str = ""
) -> CtxrulesError:
    """An ``OSError`` as one line: what failed on ``path``, why, and what to do."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        hint = "free some space (or write elsewhere) and run it again"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "choose a place you can write to"
    else:
        hint = "check the path and run it again"
    tail = f"; {what}" if what else ""
    return CtxrulesError(f"cannot {doing}: {reason}{tail}", where=os.fspath(path), hint=hint)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise CtxrulesError("a part of the path is not a directory", where=str(path)) from None
    except OSError as exc:
        raise io_error(exc, path, "look at it") from None


def checked_dir(path: str | os.PathLike[str], *, option: str) -> Path:
    """The output folder ``path``, made if missing: ``CtxrulesError`` when it is not a
    folder (or a link to one) or cannot be made."""
    folder = Path(path)
    st = _lstat(folder)
    if st is not None and not stat.S_ISDIR(
        folder.stat().st_mode if stat.S_ISLNK(st.st_mode) else st.st_mode
    ):
        raise CtxrulesError(
            f"is {kind_of(st.st_mode)}, not a folder",
            where=f"{option} {folder}",
            hint=f"give {option} a folder (made if missing)",
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise io_error(exc, folder, "make the folder") from None
    return folder


class OutputFile:
    """One output file being made (see the module docstring); a context manager that
    releases the lock and removes an uncommitted temporary file when it ends."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        kind: str,
        ours: Recognise,
        force: bool = False,
        option: str = "--out",
    ):
        self.path = Path(path)
        self.kind = kind
        self.option = option
        self._tmp: Path | None = None
        self._fh: IO[bytes] | None = None
        self._lock_fd: int | None = None
        where = f"{option} {self.path}"
        if not str(path):
            raise CtxrulesError("the output path is empty", where=option)
        st = _lstat(self.path)
        #: Whether the target exists (and is ours, or ``force`` was given).
        self.exists = st is not None
        if st is not None and stat.S_ISLNK(st.st_mode):
            if not force:
                raise CtxrulesError(
                    "is a symbolic link; it is not followed",
                    where=where,
                    hint="give the path it points to, or --force to replace the link itself",
                )
        elif st is not None and not stat.S_ISREG(st.st_mode):
            raise CtxrulesError(
                f"is {kind_of(st.st_mode)}, not a file this command can write",
                where=where,
                hint=f"give {option} a file path",
            )
        elif st is not None and not force and not self._recognised(ours):
            raise CtxrulesError(
                f"exists and is not {kind} written by ctxrules; it was left untouched",
                where=where,
                hint="give another path, or --force to replace it",
            )
        folder = self.path.parent
        fst = _lstat(folder) if str(folder) else None
        if fst is None or not stat.S_ISDIR(folder.stat().st_mode):
            raise CtxrulesError(
                "its folder does not exist" if fst is None else "its folder is not a directory",
                where=where,
                hint="make the folder first, or give another path",
            )
        self._lock()

    def _recognised(self, ours: Recognise) -> bool:
        try:
            return bool(ours(self.path))
        except OSError as exc:
            raise io_error(exc, self.path, "read it") from None

    @property
    def lock_path(self) -> Path:
        """The lock file beside the target."""
        return self.path.with_name(f".{self.path.name}.lock")

    def _lock(self) -> None:
        lock = self.lock_path
        while True:
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            except OSError as exc:
                raise io_error(exc, self.path, f"write beside it ({lock.name})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_pid(fd)
                os.close(fd)
                who = f"process {holder}" if holder else "another process"
                raise CtxrulesError(
                    f"{who} is writing it now",
                    where=f"{self.option} {self.path}",
                    hint="wait for that run to finish, or give another path",
                ) from None
            # The lock file may have been removed (a writer finishing) between our open
            # and our lock: then we hold a lock nobody else sees; take the new file's.
            try:
                same = os.fstat(fd).st_ino == os.stat(lock).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass  # the pid is a courtesy for the next writer's message
        self._lock_fd = fd

    @property
    def started(self) -> bool:
        """Whether anything was written (``open``) and not yet committed."""
        return self._fh is not None

    def open(self) -> IO[bytes]:
        """The temporary file beside the target, opened for writing (made once)."""
        if self._fh is None:
            self._tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            try:
                fd = os.open(
                    self._tmp,
                    os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW,
                    0o644,
                )
            except OSError as exc:
                raise io_error(exc, self.path, f"write beside it ({self._tmp.name})") from None
            self._fh = os.fdopen(fd, "wb")
        return self._fh

    def write(self, data: bytes) -> None:
        """Write to the temporary file (``CtxrulesError`` on a full disk or I/O error)."""
        try:
            self.open().write(data)
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        """Push what was written to the operating system (a killed run keeps it)."""
        try:
            if self._fh is not None:
                self._fh.flush()
        except OSError as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: OSError) -> CtxrulesError:
        kept = "the old file was kept as it was" if self.exists else "nothing was written"
        return io_error(exc, self.path, "write it", what=kept)

    def commit(self) -> None:
        """Sync the temporary file and rename it over the target."""
        fh = self.open()
        assert self._tmp is not None
        try:
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
            os.replace(self._tmp, self.path)
        except OSError as exc:
            raise self._failed(exc) from None
        finally:
            self._fh = None
        self._tmp = None
        try:
            dfd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        except OSError:
            pass
        finally:
            os.close(dfd)

    def remove(self) -> None:
        """Remove the target (checked as ours, or ``force``): this run has nothing to
        put there and what an earlier one put there is no longer true."""
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            raise io_error(exc, self.path, "remove it") from None
        self.exists = False

    def close(self) -> None:
        """Remove an uncommitted temporary file and release the lock."""
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError:
                pass
            self._fh = None
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None
        if self._lock_fd is not None:
            try:
                self.lock_path.unlink(missing_ok=True)  # before the unlock: see _lock
            except OSError:
                pass
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _read_pid(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""
