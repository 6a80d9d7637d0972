"""Wake a waiting worker when another process commits to a SQLite file.

On Linux an inotify watch on the file's folder reports each write to the WAL file at once,
at no cost while idle. Elsewhere (or if inotify is unavailable) the WAL file's size and
mtime are polled.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
import time

POLL = 0.02  # seconds between looks at the WAL file when inotify is unavailable
_IN_MODIFY, _IN_CREATE = 0x2, 0x100
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
_HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)


def _stat(path: str) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return (0, 0, 0)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _inotify_fd(folder: str) -> int | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
        if fd < 0:
            return None
        if libc.inotify_add_watch(fd, os.fsencode(folder), _IN_MODIFY | _IN_CREATE) < 0:
            os.close(fd)
            return None
        return fd
    except (OSError, AttributeError):
        return None


class FileWatch:
    """Waits until a given file is written, or a timeout passes."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self.name = os.fsencode(os.path.basename(self.path))
        self._fd = _inotify_fd(os.path.dirname(self.path))

    def _changed(self) -> bool:
        """Read pending inotify events; whether one was about our file."""
        assert self._fd is not None
        found = False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return found
            offset = 0
            while offset + _HEADER.size <= len(data):
                _, _, _, length = _HEADER.unpack_from(data, offset)
                name = data[offset + _HEADER.size : offset + _HEADER.size + length]
                found = found or name.rstrip(b"\0") == self.name
                offset += _HEADER.size + length

    def wait(self, timeout: float) -> None:
        """Return when the file is written (by anyone) or after timeout seconds."""
        deadline = time.monotonic() + timeout
        if self._fd is None:
            before = _stat(self.path)
            while (left := deadline - time.monotonic()) > 0:
                time.sleep(min(POLL, left))
                if _stat(self.path) != before:
                    return
            return
        self._changed()  # forget writes made before we started waiting (our own, mostly)
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self._fd], [], [], left)
            if readable and self._changed():
                return

    def close(self) -> None:
        """Stop watching."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
