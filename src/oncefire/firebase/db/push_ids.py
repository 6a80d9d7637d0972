"""Push ids as Firebase makes them: 20 characters that sort in the order they were made.

The first 8 characters are the time in milliseconds, 6 bits a character; the last 12 are
random, and within one millisecond each id is the one before plus one, so ids made in a
process sort as they were made, and ids of several processes by time. The alphabet is in
ASCII order, so that text order is time order.
"""

from __future__ import annotations

import secrets
import threading

ALPHABET = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"
_lock = threading.Lock()
_last_ms = -1
_last_random: list[int] = []


def push_id(now_ms: int) -> str:
    """A new push id for a time in milliseconds."""
    global _last_ms, _last_random
    with _lock:
        if now_ms <= _last_ms:  # the same millisecond (or a clock that went back): count up
            now_ms = _last_ms
            _last_random = _plus_one(_last_random)
        else:
            _last_random = [secrets.randbelow(64) for _ in range(12)]
        _last_ms = now_ms
        digits = list(_last_random)
    stamp = []
    for _ in range(8):
        stamp.append(ALPHABET[now_ms % 64])
        now_ms //= 64
    return "".join(reversed(stamp)) + "".join(ALPHABET[d] for d in digits)


def _plus_one(digits: list[int]) -> list[int]:
    out = list(digits)
    for i in range(len(out) - 1, -1, -1):
        if out[i] < 63:
            out[i] += 1
            return out
        out[i] = 0
    return out
