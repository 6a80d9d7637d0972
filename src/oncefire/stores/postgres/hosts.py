"""Which server a PostgreSQL connection reaches: the options that make a URL of several hosts
(a primary and its standbys) find the primary, and what a connection's server last said it is.
After a failover, a connection made anew reaches the promoted standby by itself."""

from __future__ import annotations

from typing import Any

from psycopg.conninfo import conninfo_to_dict

from oncefire.stores.postgres.statements import Connection

CONNECT_TIMEOUT = 5  # seconds a host may take to answer (libpq counts whole seconds)


def connect_options(url: str, **defaults: Any) -> dict[str, Any]:
    """Connection options for url: ours, unless the URL sets them itself. A URL of several
    hosts (a primary and its standbys, `postgresql://h1,h2/db`) asks libpq for the one that
    takes writes (target_session_attrs=read-write): after a failover a new connection finds
    the promoted standby by itself."""
    given = conninfo_to_dict(url)
    if "," in str(given.get("host") or given.get("hostaddr") or ""):
        defaults = {"target_session_attrs": "read-write", **defaults}
    return {k: v for k, v in defaults.items() if k not in given}


def is_read_only(conn: Connection) -> bool:
    """Whether the connection's server refuses writes, as it last reported (no round trip): a
    standby (in_hot_standby), or a server whose transactions are read-only by default."""
    status = conn.info.parameter_status
    return "on" in (status("in_hot_standby"), status("default_transaction_read_only"))


def is_standby(conn: Connection) -> bool:
    """Whether the connection's server is a standby, as it last reported (no round trip)."""
    return conn.info.parameter_status("in_hot_standby") == "on"
