"""Writing into folders others may reach: never through a link, never half a file.

The harness runs as root in CI and writes into report folders (--out), run
folders and its state folder ($HARNESS_HOME). A fixed temporary name such as
`.report.md.tmp` is a trap there: anyone who can create that name first (a
link to /etc/passwd, say) makes root write through it. So every write goes
into a temporary file this process creates itself, with a random name, in the
same folder, with O_CREAT|O_EXCL|O_NOFOLLOW (it can be neither an existing
file nor a link), and is then renamed over the target (`os.replace`, which
replaces a link rather than following it). The folder is opened once and
every step is taken relative to it, so a folder swapped for a link halfway
through changes nothing. A failed write (a full disk, say) removes its
temporary file and raises the OSError.

`check_folder` refuses a folder the harness writes into when someone else
could plant names in it: one writable by others (even with the sticky bit,
as /tmp: the sticky bit stops others from deleting our files, not from
creating the names we are about to use) or owned by another user (who
could change its mode or contents at any time).
`make_folder` creates folders with a mode of our choosing, whatever the
umask. `read_limited` reads a small regular file, refusing devices and
FIFOs without blocking on them.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from .errors import HarnessError

PUBLIC = 0o644
PRIVATE = 0o600      # secrets: passwords, client settings with credentials; every file of the state folder
PRIVATE_FOLDER = 0o700   # every folder the harness makes in the state folder
PRIVATE_UMASK = 0o077    # what Kafka, PostgreSQL's tools and Toxiproxy create there: their owner's only


def write_text(path, text: str, mode: int = PUBLIC) -> Path:
    return write_bytes(path, text.encode(), mode)


def write_bytes(path, data: bytes, mode: int = PUBLIC) -> Path:
    """Replace `path` with `data` atomically, through a temporary file of our own (see the module doc)."""
    path = Path(path)
    dfd = _open_folder(path.parent)
    try:
        tmp, fd = _create_temp(dfd, path.name, mode)
        try:
            try:
                os.fchmod(fd, mode)            # the umask may have taken bits away (or left too many)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
    finally:
        os.close(dfd)
    return path


def write_state(path, text: str, mode: int = PUBLIC) -> Path:
    """`write_text` for a state file: a failure (a full disk) is one HarnessError; no temporary file is left."""
    try:
        return write_text(path, text, mode)
    except OSError as e:
        raise HarnessError(f"cannot write {path}: {e.strerror or e}") from None


def create_new(path, text: str, mode: int = PUBLIC) -> bool:
    """Create `path` holding `text` only if nothing (not even a link) has that name; False when it exists."""
    path = Path(path)
    dfd = _open_folder(path.parent)
    try:
        try:
            fd = os.open(path.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                         dir_fd=dfd)
        except FileExistsError:
            return False
        try:
            os.fchmod(fd, mode)
            os.write(fd, text.encode())
        except BaseException:
            os.close(fd)
            os.unlink(path.name, dir_fd=dfd)
            raise
        os.close(fd)
        return True
    finally:
        os.close(dfd)


def _open_folder(folder: Path) -> int:
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _create_temp(dfd: int, name: str, mode: int) -> tuple[str, int]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return tmp, os.open(tmp, flags, mode, dir_fd=dfd)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name}")


def is_temp(name: str) -> bool:
    """Whether `name` is one of our temporary files (for tests and clean-ups)."""
    return name.startswith(".") and name.endswith(".tmp")


# ---- folders ---------------------------------------------------------------------------------

def why_unsafe_folder(folder) -> str | None:
    """Why the harness must not write into this existing folder, or None when it may."""
    try:
        st = os.stat(folder)
    except OSError as e:
        return e.strerror or str(e)
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    if st.st_uid != os.geteuid():
        return f"it belongs to another user (uid {st.st_uid})"
    if st.st_mode & stat.S_IWOTH:
        return (f"anyone may write in it (mode {stat.S_IMODE(st.st_mode):o}), so anyone could plant files or links "
                f"there")
    return None


def foreign_link(path) -> str | None:
    """Why `path` may not be trusted because a link on the way to it is another user's, or None.

    Each component of the absolute path (links not yet resolved) that is a symbolic link must be owned
    by us or by root, and sit in a folder owned by us or by root: another user's link (or any link in
    another user's folder) can be pointed at a folder of ours, at any time, and we would write there."""
    me = os.geteuid()
    p = Path(os.path.abspath(path))
    for part in [*reversed(p.parents), p]:
        try:
            st = os.lstat(part)
        except (FileNotFoundError, NotADirectoryError):
            return None           # what does not exist yet is made by us, not followed (or said elsewhere)
        except OSError as e:
            return f"cannot read {part}: {e.strerror or e}"
        if not stat.S_ISLNK(st.st_mode):
            continue
        try:
            parent = os.stat(part.parent)
        except OSError as e:
            return f"cannot read {part.parent}: {e.strerror or e}"
        if st.st_uid not in (me, 0):
            return f"{part} is a symbolic link another user (uid {st.st_uid}) made and can point anywhere"
        if parent.st_uid not in (me, 0):
            return f"{part} is a symbolic link in a folder of another user (uid {parent.st_uid}), who can re-point it"
    return None


def check_folder(folder, what: str, hint: str = "") -> None:
    """Raise one line when `folder` exists and is unsafe to write into (see `why_unsafe_folder`)."""
    if not os.path.isdir(folder):
        return
    why = why_unsafe_folder(folder)
    if why:
        raise HarnessError(f"refusing {what} {folder}: {why}{'; ' + hint if hint else ''}")


def make_folder(folder, mode: int = 0o755) -> Path:
    """`mkdir -p` with `mode` for each folder made here (the umask does not narrow or widen it)."""
    folder = Path(folder)
    missing = []
    p = folder
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            continue
        os.chmod(d, mode, follow_symlinks=False)
    if not folder.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(folder))
    return folder


# ---- reading small files ---------------------------------------------------------------------

def read_limited(path, limit: int, what: str, follow_links: bool = True) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or one HarnessError.

    Opened without blocking (a FIFO would otherwise wait for a writer forever), then refused unless it
    is a regular file (/dev/zero would be read until memory runs out). With `follow_links=False` a link at
    `path` itself is refused (a file another user may replace with a link to one only we may read)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise HarnessError(f"cannot read {what} {path}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise HarnessError(f"cannot read {what} {path}: not a regular file")
        if st.st_size > limit:
            raise HarnessError(f"cannot read {what} {path}: larger than {limit:,} bytes")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise HarnessError(f"cannot read {what} {path}: larger than {limit:,} bytes")
        return b"".join(chunks)
    except OSError as e:
        raise HarnessError(f"cannot read {what} {path}: {e.strerror or e}") from None
    finally:
        os.close(fd)


# ---- logs ------------------------------------------------------------------------------------

def open_log(path, truncate: bool = False):
    """A log file to append to (or truncate), opened in binary without following a link at its name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_TRUNC if truncate else os.O_APPEND)
    return open(os.open(path, flags, PUBLIC), "wb" if truncate else "ab")


def read_tail(path, limit: int = 64 * 1024) -> str:
    """The last `limit` bytes of a regular file as text, or "" (never blocks on a FIFO, never follows a link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        os.lseek(fd, max(0, st.st_size - limit), os.SEEK_SET)
        return os.read(fd, limit).decode(errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
