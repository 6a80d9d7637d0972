"""Wake a waiting worker when another process commits to a SQLite file.

An inotify watch on the file's folder reports each write to the WAL file (Linux); elsewhere
the WAL file's size and mtime are polled. A commit writes the WAL before it lets go of the
lock, so a worker woken by that write would find the lock held and nap in SQLite's busy
handler. oncefire's own writers therefore also write the wake file once their commit has
returned (WakeFile): a write to the WAL ends the wait only after GRACE, unless the wake file
is written first. A wake within FLOWING of the wait's start (writes are flowing) waits GRACE
too, so the worker's next turn takes the following write's event as well.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import select
import struct
import threading
import time
from contextlib import suppress

POLL = 0.02  # seconds between looks at the WAL file when inotify is unavailable
GRACE = 0.001  # seconds a write to the WAL waits for the wake file (SQLite's first nap)
FLOWING = 0.002  # a wake this soon after the wait began: writes are flowing (see wait)
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


def _mode_of(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o666
    except OSError:
        return 0o644


class WakeFile:
    """A one-byte file beside the store that tells sleeping workers a write committed.

    A worker about to sleep sets the byte through a shared map (which no watch sees); a writer
    whose commit returned and finds it set writes it back to zero (which every watch sees). So
    a commit wakes the workers that sleep, for one system call, and costs a look at a byte
    while none does. A folder this process cannot write leaves the WAL's watch alone.
    """

    def __init__(self, store_path: str) -> None:
        self.store_path = os.path.abspath(store_path)
        self.path = self.store_path + "-wake"
        self._fd = -1
        self._map: mmap.mmap | None = None
        self._opened = False
        self._lock = threading.Lock()

    def _open(self) -> mmap.mmap | None:
        with self._lock:
            if not self._opened:
                with suppress(OSError, ValueError):
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                    try:
                        if os.fstat(fd).st_size < 1:  # new: as writable as the store
                            os.fchmod(fd, _mode_of(self.store_path))
                            os.pwrite(fd, b"\0", 0)
                        self._map = mmap.mmap(fd, 1)
                    except BaseException:
                        os.close(fd)
                        raise
                    self._fd = fd
                self._opened = True
            return self._map

    def sleeping(self) -> None:
        """Ask the next commit to write the file (a worker about to wait)."""
        shared = self._map if self._opened else self._open()
        with suppress(ValueError):  # closed meanwhile (the store's close)
            if shared is not None:
                shared[0] = 1

    def committed(self) -> None:
        """Wake the sleeping workers, if any (a write whose commit returned)."""
        shared = self._map if self._opened else self._open()
        with suppress(OSError, ValueError):  # ValueError: closed meanwhile (the store's close)
            if shared is not None and shared[0]:
                with self._lock:  # not to a number close() gave back, now another file's
                    if self._map is shared:
                        os.pwrite(self._fd, b"\0", 0)

    def close(self) -> None:
        """Let go of the file (the next use opens it again)."""
        with self._lock:
            if self._map is not None:
                self._map.close()
                os.close(self._fd)
            self._fd, self._map, self._opened = -1, None, False


class FileWatch:
    """Waits until a given file is written, or a timeout passes."""

    def __init__(self, path: str, *, wake: WakeFile | None = None) -> None:
        """wake: a file written once a write to `path` has committed (it ends the wait at
        once; a write to `path` alone ends it GRACE seconds later)."""
        self.path = os.path.abspath(path)
        self.name = os.fsencode(os.path.basename(self.path))
        self.wake = wake
        self._wake_name = None if wake is None else os.fsencode(os.path.basename(wake.path))
        self._fd = _inotify_fd(os.path.dirname(self.path))

    def _changed(self) -> tuple[bool, bool]:
        """Read pending inotify events; whether one was about our file, and about the wake
        file."""
        assert self._fd is not None
        found = woken = False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return found, woken
            offset = 0
            while offset + _HEADER.size <= len(data):
                _, _, _, length = _HEADER.unpack_from(data, offset)
                name = data[offset + _HEADER.size : offset + _HEADER.size + length].rstrip(b"\0")
                found = found or name == self.name
                woken = woken or name == self._wake_name
                offset += _HEADER.size + length

    def wait(self, timeout: float) -> None:
        """Return when the file is written (by anyone) or after timeout seconds."""
        deadline = time.monotonic() + timeout
        if self._fd is not None:
            self._changed()  # forget writes made before we started waiting (our own, mostly)
        if self.wake is not None:
            self.wake.sleeping()  # after: a wake written from here on is seen
        if self._fd is None:
            watched = [self.path] if self.wake is None else [self.path, self.wake.path]
            before = [_stat(path) for path in watched]
            while (left := deadline - time.monotonic()) > 0:
                time.sleep(min(POLL, left))
                if [_stat(path) for path in watched] != before:
                    return
            return
        began = time.monotonic()
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self._fd], [], [], left)
            if not readable:
                continue
            found, woken = self._changed()
            now = time.monotonic()
            if woken and now - began >= FLOWING:
                return
            if found or woken:
                # The commit may not be complete yet: wait a little for its wake. A wake that
                # came as soon as the wait began (writes are flowing) waits as long: the
                # writer's next write goes first, and this worker's turn takes both.
                grace = GRACE if self.wake is not None else 0.0
                deadline = min(deadline, now + grace)

    def close(self) -> None:
        """Stop watching."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
