"""The scale-out store: PostgreSQL through psycopg 3 and a pool, shared by any number of workers.

Semantics are SqliteStore's (see postgres_tx for how writers of one key are serialized).
Workers claim with FOR UPDATE SKIP LOCKED and are woken by NOTIFY, with polling behind it.
Every statement goes to the one server the URL names: no decision reads a replica.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import astuple
from typing import Any

from oncefire.errors import MissingDependencyError, SchemaVersionError
from oncefire.events import StoredEvent
from oncefire.paths import parent_of
from oncefire.stores import migrations
from oncefire.stores.base import (
    AttemptResult,
    Claimed,
    DeadLetterFilter,
    DeadLetterRow,
    FunctionCounts,
    FunctionRecord,
    IdempotencyRecord,
    Lease,
)
from oncefire.stores.catalog import BUMP_SQL, Catalog, CatalogCache, Fanout

try:
    import psycopg  # noqa: F401 - imported first, so that its absence says what to install
    import psycopg_pool  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by a test that hides psycopg
    raise MissingDependencyError(
        "PostgreSQL support needs psycopg 3 and psycopg-pool: pip install 'oncefire[postgres]'."
    ) from exc

from oncefire.stores.postgres_listener import Listener
from oncefire.stores.postgres_pool import POOL_MAX, POOL_MIN, Pool
from oncefire.stores.postgres_tx import (
    CHANNEL,
    SET_DOCUMENT_SQL,
    Connection,
    PostgresTx,
    lock_key,
    notifying,
    set_document_args,
)

_DEAD_COLUMNS = """d.id, d.function, d.event_id, e.type, e.source, d.attempt, d.error, d.dead_at,
    COALESCE(d.dead_payload, e.data), d.truncated"""
_NEW_TOKEN = "replace(gen_random_uuid()::text, '-', '')"
# An attempt's row is written once, when it ends, from what its delivery tells of it (d: an
# UPDATE ... RETURNING _ENDED) and the result's parameters; until then the delivery is it.
_ENDED = "id, event_id, function, attempt, worker, claimed_at"
_WRITE_ATTEMPT = (
    "INSERT INTO oncefire_attempts (delivery_id, event_id, function, number, worker,"
    " started_at, finished_at, outcome, error)"
)
_ATTEMPT_OF_D = (
    "id, event_id, function, attempt, worker, COALESCE(%(started_at)s::double precision,"
    " claimed_at, %(finished_at)s), %(finished_at)s, %(outcome)s, %(error)s"
)


def _ending(lease: Lease, result: AttemptResult) -> dict[str, Any]:
    """The parameters of a statement that ends a delivery under lease and writes its attempt."""
    return {
        "id": lease.delivery_id,
        "token": lease.token,
        "finished_at": result.finished_at,
        "started_at": result.started_at,
        "outcome": result.outcome,
        "error": result.error,
    }


class PostgresStore:
    """oncefire's state in a PostgreSQL database, shared by workers on many machines."""

    dialect = "postgres"

    def __init__(self, url: str, *, pool_min: int = POOL_MIN, pool_max: int = POOL_MAX) -> None:
        self.url = url
        self._db = Pool(url, min_size=pool_min, max_size=pool_max)
        self._listener = Listener(url)
        self._catalogs = CatalogCache()  # functions and index fields, between transactions
        try:
            self.migrate()
        except BaseException:
            self.close()
            raise

    @contextmanager
    def batch(self) -> Iterator[None]:
        with self._db.batch():
            yield

    @contextmanager
    def transaction(self) -> Iterator[PostgresTx]:
        with self._db.transaction(is_pipelined=True) as conn:
            yield PostgresTx(conn, is_write=True, catalogs=self._catalogs)

    @contextmanager
    def read(self) -> Iterator[PostgresTx]:
        with self._db.snapshot() as conn:
            yield PostgresTx(conn, is_write=False, catalogs=self._catalogs)

    def set_document(
        self,
        path: str,
        data_json: str,
        now: float,
        event_id: str,
        fanout_of: Callable[[Catalog], Fanout],
    ) -> bool:
        """Write a whole document and its event in one statement (one round trip); False,
        having written nothing, when the catalogue changed or the row is from before schema
        6: the caller then writes through a transaction."""
        catalog = self._catalogs.last()
        if catalog is None:
            return False
        args = set_document_args(
            catalog,
            fanout_of(catalog),
            path=path,
            collection=parent_of(path),
            data_json=data_json,
            now=now,
            event_id=event_id,
        )
        return bool(self._db.run(SET_DOCUMENT_SQL, args)[0][0] != "stale")

    def close(self) -> None:
        self._listener.close()
        self._db.close()

    # -- schema ------------------------------------------------------------------------

    def migrate(self) -> int:
        steps = migrations.load(self.dialect)
        with self._db.transaction() as conn:
            # Concurrent first use: one process migrates, the others wait here and find it done.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("migrate", "schema"),))
            conn.execute("CREATE TABLE IF NOT EXISTS oncefire_schema (version integer NOT NULL)")
            row = conn.execute("SELECT max(version) FROM oncefire_schema").fetchone()
            current = int(row[0] or 0) if row else 0
            if current > steps[-1][0]:
                raise SchemaVersionError(
                    f"The store's schema is at {current} but this oncefire knows only "
                    f"{steps[-1][0]}: upgrade oncefire."
                )
            for version, sql in steps:
                if version > current:
                    conn.execute(sql.encode())  # a script: no parameters, several statements
                    conn.execute("INSERT INTO oncefire_schema (version) VALUES (%s)", (version,))
                    current = version
        return current

    # -- catalog -----------------------------------------------------------------------

    def register_functions(self, records: Sequence[FunctionRecord]) -> None:
        with self._db.transaction() as conn:
            conn.cursor().executemany(
                "INSERT INTO oncefire_functions (name, kind, source, event_types, registered_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET"
                " kind = excluded.kind, source = excluded.source,"
                " event_types = excluded.event_types",
                [
                    (r.name, r.kind, r.source, ",".join(r.event_types), r.registered_at)
                    for r in records
                ],
            )
            conn.execute(BUMP_SQL)  # every store's next transaction reads the catalogue again

    def declare_index(
        self,
        collection: str,
        field: str,
        entries_of: Callable[[Iterator[tuple[str, dict[str, Any]]]], dict[str, str]],
    ) -> None:
        with self._db.transaction() as conn:
            # EXCLUSIVE mode waits for document writes in flight (from their first row lock:
            # that is when they check the catalogue) and holds off new ones until the index
            # is complete, so no write slips between the read and the declaration.
            conn.execute("LOCK TABLE oncefire_documents IN EXCLUSIVE MODE")
            entries = entries_of(PostgresTx(conn, is_write=True).list_documents(collection))
            conn.execute(
                "INSERT INTO oncefire_index_fields (collection, field) VALUES (%s, %s)"
                " ON CONFLICT DO NOTHING",
                (collection, field),
            )
            conn.execute(BUMP_SQL)
            conn.execute(
                "DELETE FROM oncefire_index_entries WHERE collection = %s AND field = %s",
                (collection, field),
            )
            conn.execute(
                "INSERT INTO oncefire_index_entries (collection, field, value, path)"
                " SELECT %s, %s, v, p FROM unnest(%s::text[], %s::text[]) AS x (p, v)",
                (collection, field, list(entries), list(entries.values())),
            )

    # -- deliveries --------------------------------------------------------------------

    def claim(
        self,
        *,
        worker: str,
        now: float,
        lease_until: float,
        limit: int,
        functions: Sequence[str],
        caps: dict[str, int],
        delivery_ids: Sequence[int] | None = None,
    ) -> list[Claimed]:
        if not functions or limit <= 0:
            return []
        args: dict[str, Any] = {
            "now": now,
            "lease_until": lease_until,
            "worker": worker,
            "limit": limit,
            "free": list(functions),
            "ids": list(delivery_ids or ()),
        }
        # Walk the due index in (run_at, id) order and stop at LIMIT. Right after a bulk
        # write, before autovacuum's ANALYZE, the planner's estimates make a bitmap scan
        # plus a sort of the whole backlog look cheaper: 8 ms a claim at 5,000 pending.
        no_bitmaps = "SET LOCAL enable_bitmapscan = off"
        if not caps:  # one round trip: an idle worker's claim is on the path of latency
            sql = _claim_sql(delivery_ids is not None, has_caps=False)
            rows = self._db.run_with(no_bitmaps, sql, args)
        else:
            with self._db.transaction() as conn:
                conn.execute(no_bitmaps)
                room = self._room(conn, caps, now)
                capped = [(f, n) for f, n in room.items() if f in functions and n > 0]
                args["free"] = [f for f in functions if f not in room]
                args["capped"] = [f for f, _ in capped]
                args["rooms"] = [min(n, limit) for _, n in capped]
                if not args["free"] and not capped:
                    return []
                sql = _claim_sql(delivery_ids is not None, has_caps=bool(capped))
                rows = conn.execute(sql, args).fetchall()
        return [
            Claimed(Lease(r[0], r[3]), r[1], r[2], now, StoredEvent(*r[4:10]), r[10]) for r in rows
        ]

    @staticmethod
    def _room(conn: Connection, caps: dict[str, int], now: float) -> dict[str, int]:
        """Free slots per capped function, counted under a lock every claimer of it takes."""
        names = sorted(caps)  # one lock order everywhere, so claimers never deadlock
        for name in names:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("function", name),))
        rows = conn.execute(
            "SELECT function, count(*) FROM oncefire_deliveries WHERE state = 'running'"
            " AND lease_until > %s AND function = ANY(%s::text[]) GROUP BY function",
            (now, names),
        ).fetchall()
        running = {r[0]: int(r[1]) for r in rows}
        return {name: caps[name] - running.get(name, 0) for name in names}

    def _finish(
        self,
        lease: Lease,
        result: AttemptResult,
        set_sql: str,
        args: dict[str, Any],
        *,
        also: str = "",
        then: str = "SELECT id FROM d",
    ) -> bool:
        """End a running delivery held by this lease, and write its attempt, in one statement;
        False (and nothing written) when the lease is no longer held."""
        rows = self._db.run(
            f"WITH d AS (UPDATE oncefire_deliveries SET {set_sql}, lease_token = NULL,"
            " lease_until = NULL WHERE id = %(id)s AND state = 'running'"
            f" AND lease_token = %(token)s RETURNING {_ENDED}),"
            f" a AS ({_WRITE_ATTEMPT} SELECT {_ATTEMPT_OF_D} FROM d){also} {then}",
            {**args, **_ending(lease, result), "channel": CHANNEL},
        )
        return len(rows) == 1

    def complete(self, lease: Lease, result: AttemptResult) -> bool:
        return self._finish(lease, result, "state = 'succeeded', error = NULL", {})

    def complete_many(self, items: Sequence[tuple[Lease, AttemptResult]]) -> set[int]:
        if not items:
            return set()
        # One statement for the whole batch: the round trip per delivery was the drain's cost.
        # A lease token is set only while its delivery runs, so matching it is the state check.
        # A literal state = 'running' would let the planner, on statistics taken when nothing
        # ran, scan the whole partial running index (dead entries too, until a vacuum) for
        # every batch instead of looking each id up by its key.
        rows = self._db.run(
            "WITH x AS (SELECT * FROM unnest(%s::bigint[], %s::text[], %s::float8[],"
            " %s::float8[]) AS x (id, token, finished_at, started_at)),"
            " d AS (UPDATE oncefire_deliveries o SET state = 'succeeded', error = NULL,"
            " lease_token = NULL, lease_until = NULL FROM x WHERE o.id = x.id"
            " AND o.lease_token = x.token"
            " RETURNING o.id, o.event_id, o.function, o.attempt, o.worker, o.claimed_at,"
            " x.finished_at, x.started_at),"
            f" a AS ({_WRITE_ATTEMPT} SELECT id, event_id, function, attempt, worker,"
            " COALESCE(started_at, claimed_at, finished_at), finished_at, 'succeeded', NULL"
            " FROM d) SELECT id FROM d",
            (
                [lease.delivery_id for lease, _ in items],
                [lease.token for lease, _ in items],
                [result.finished_at for _, result in items],
                [result.started_at for _, result in items],
            ),
        )
        return {int(r[0]) for r in rows}

    def retry(self, lease: Lease, result: AttemptResult, run_at: float) -> bool:
        is_due = run_at <= result.finished_at  # due at once: wake a worker for it
        return self._finish(
            lease,
            result,
            "state = 'pending', run_at = %(run_at)s, error = %(error)s",
            {"run_at": run_at},
            then=notifying("d") if is_due else "SELECT id FROM d",
        )

    def bury(
        self, lease: Lease, result: AttemptResult, error: str | None, truncated: str | None
    ) -> bool:
        # The full payload is not kept once no other delivery still needs it.
        also = (
            ", t AS (UPDATE oncefire_events SET data = %(truncated)s::jsonb WHERE id = (SELECT"
            " event_id FROM d) AND NOT EXISTS (SELECT 1 FROM oncefire_deliveries o"
            " WHERE o.event_id = oncefire_events.id AND o.id != %(id)s"
            " AND o.state IN ('pending', 'running')))"
        )
        return self._finish(
            lease,
            result,
            "state = 'dead', error = %(dead_error)s, dead_at = %(finished_at)s,"
            " truncated = %(is_truncated)s, dead_payload = %(truncated)s::jsonb",
            {"dead_error": error, "is_truncated": truncated is not None, "truncated": truncated},
            also=also if truncated is not None else "",
        )

    def forward(
        self, lease: Lease, result: AttemptResult, event: StoredEvent, functions: Sequence[str]
    ) -> bool:
        with self._db.transaction() as conn:
            done = conn.execute(
                "WITH d AS (UPDATE oncefire_deliveries SET state = 'forwarded', error = %(error)s,"
                " lease_token = NULL, lease_until = NULL WHERE id = %(id)s AND state = 'running'"
                f" AND lease_token = %(token)s RETURNING {_ENDED})"
                f" {_WRITE_ATTEMPT} SELECT {_ATTEMPT_OF_D} FROM d",
                _ending(lease, result),
            )
            if done.rowcount != 1:
                return False
            PostgresTx(conn, is_write=True).append(event, functions, event.time)
            return True

    def release(self, leases: Sequence[Lease]) -> int:
        if not leases:
            return 0
        # The token is the state check, as in complete_many.
        rows = self._db.run(
            "WITH d AS (UPDATE oncefire_deliveries d SET state = 'pending',"
            " attempt = d.attempt - 1, lease_token = NULL, lease_until = NULL, worker = NULL"
            " FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS l (id, token)"
            " WHERE d.id = l.id AND d.lease_token = l.token"
            " RETURNING d.id) " + notifying("d"),
            {
                "ids": [x.delivery_id for x in leases],
                "tokens": [x.token for x in leases],
                "channel": CHANNEL,
            },
        )
        return len(rows[0][0]) if rows else 0

    def renew(self, leases: Sequence[Lease], now: float, lease_until: float) -> list[Lease]:
        if not leases:
            return []
        # The token is the state check, as in complete_many.
        rows = self._db.run(
            "UPDATE oncefire_deliveries d SET lease_until = %s"
            " FROM unnest(%s::bigint[], %s::text[]) AS l (id, token)"
            " WHERE d.id = l.id AND d.lease_token = l.token"
            " AND d.lease_until > %s RETURNING d.id",
            (lease_until, [x.delivery_id for x in leases], [x.token for x in leases], now),
        )
        kept = {int(r[0]) for r in rows}
        return [lease for lease in leases if lease.delivery_id in kept]

    def expired_leases(self, now: float, functions: Sequence[str], limit: int) -> list[Claimed]:
        if not functions:
            return []
        rows = self._db.run(
            "SELECT d.id, d.lease_token, d.function, d.attempt, d.claimed_at,"
            " e.id, e.type, e.source, e.time, e.data, e.size FROM oncefire_deliveries d"
            " JOIN oncefire_events e ON e.id = d.event_id WHERE d.state = 'running'"
            " AND d.lease_until <= %s AND d.function = ANY(%s::text[]) ORDER BY d.id LIMIT %s",
            (now, list(functions), limit),
        )
        return [
            Claimed(
                Lease(r[0], r[1]),
                r[2],
                r[3],
                r[4] if r[4] is not None else now,
                StoredEvent(*r[5:11]),
            )
            for r in rows
        ]

    def wait(self, timeout: float) -> None:
        self._listener.wait(timeout)

    def next_due(self, functions: Sequence[str]) -> float | None:
        if not functions:
            return None
        rows = self._db.run(
            "SELECT min(run_at) FROM oncefire_deliveries WHERE state = 'pending'"
            " AND function = ANY(%s::text[])",
            (list(functions),),
        )
        return None if rows[0][0] is None else float(rows[0][0])

    # -- dead letters ------------------------------------------------------------------

    @staticmethod
    def _dead_where(
        where: DeadLetterFilter, ids: Sequence[int] | None
    ) -> tuple[str, dict[str, Any]]:
        sql, args = "d.state = 'dead'", dict[str, Any]()
        if where.function is not None:
            sql += " AND d.function = %(function)s"
            args["function"] = where.function
        if where.error_contains is not None:
            sql += " AND strpos(d.error, %(error_contains)s) > 0"
            args["error_contains"] = where.error_contains
        if where.since is not None:
            sql += " AND d.dead_at >= %(since)s"
            args["since"] = where.since
        if where.until is not None:
            sql += " AND d.dead_at < %(until)s"
            args["until"] = where.until
        if ids is not None:
            sql += " AND d.id = ANY(%(ids)s::bigint[])"
            args["ids"] = list(ids)
        return sql, args

    @staticmethod
    def _dead_row(r: Sequence[Any]) -> DeadLetterRow:
        return DeadLetterRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], bool(r[9]))

    def list_dead(
        self, where: DeadLetterFilter, limit: int, before_id: int | None
    ) -> list[DeadLetterRow]:
        sql, args = self._dead_where(where, None)
        if before_id is not None:
            sql += " AND d.id < %(before)s"
            args["before"] = before_id
        rows = self._db.run(
            f"SELECT {_DEAD_COLUMNS} FROM oncefire_deliveries d JOIN oncefire_events e"
            f" ON e.id = d.event_id WHERE {sql} ORDER BY d.id DESC LIMIT %(limit)s",
            {**args, "limit": limit},
        )
        return [self._dead_row(r) for r in rows]

    def get_dead(self, delivery_id: int) -> DeadLetterRow | None:
        rows = self._db.run(
            f"SELECT {_DEAD_COLUMNS} FROM oncefire_deliveries d JOIN oncefire_events e"
            " ON e.id = d.event_id WHERE d.state = 'dead' AND d.id = %s",
            (delivery_id,),
        )
        return self._dead_row(rows[0]) if rows else None

    def count_dead(self, where: DeadLetterFilter) -> int:
        sql, args = self._dead_where(where, None)
        return int(
            self._db.run(f"SELECT count(*) FROM oncefire_deliveries d WHERE {sql}", args)[0][0]
        )

    def replay(self, where: DeadLetterFilter, now: float, ids: Sequence[int] | None) -> int:
        sql, args = self._dead_where(where, ids)
        rows = self._db.run(
            "WITH d AS (UPDATE oncefire_deliveries AS d SET state = 'pending', attempt = 0,"
            " run_at = %(now)s, replayed_at = %(now)s, error = NULL, dead_at = NULL, worker = NULL"
            f" WHERE {sql} AND NOT d.truncated RETURNING d.id) " + notifying("d"),
            {**args, "now": now, "channel": CHANNEL},
        )
        return len(rows[0][0]) if rows else 0

    def dismiss(self, where: DeadLetterFilter, ids: Sequence[int] | None) -> int:
        sql, args = self._dead_where(where, ids)
        return int(self._db.run(f"DELETE FROM oncefire_deliveries AS d WHERE {sql}", args)[0])

    # -- history -----------------------------------------------------------------------

    def counts(self, since: float) -> dict[str, FunctionCounts]:
        with self._db.snapshot() as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM oncefire_functions")]
            out = {n: FunctionCounts({}, [], {}, 0, 0) for n in names}

            def entry(name: str) -> FunctionCounts:
                return out.setdefault(name, FunctionCounts({}, [], {}, 0, 0))

            for name, outcome, n in conn.execute(
                "SELECT function, outcome, count(*) FROM oncefire_attempts"
                " WHERE finished_at >= %s GROUP BY function, outcome",
                (since,),
            ):
                entry(name).outcomes[outcome] = int(n)
            for name, duration in conn.execute(
                "SELECT function, finished_at - started_at FROM oncefire_attempts"
                " WHERE finished_at >= %s AND outcome IS NOT NULL ORDER BY id",
                (since,),
            ):
                entry(name).durations.append(float(duration))
            for name, state, n in conn.execute(
                "SELECT function, 'pending', count(*) FROM oncefire_deliveries"
                " WHERE state = 'pending' GROUP BY function UNION ALL"
                " SELECT function, 'running', count(*) FROM oncefire_deliveries"
                " WHERE state = 'running' GROUP BY function UNION ALL"
                " SELECT function, 'dead', count(*) FROM oncefire_deliveries"
                " WHERE state = 'dead' GROUP BY function"
            ):
                entry(name).states[state] = int(n)
            extra: dict[str, dict[str, int]] = {}
            for name, most in conn.execute(
                "SELECT function, max(n) FROM (SELECT function, count(*) AS n FROM"
                " oncefire_attempts WHERE finished_at >= %s GROUP BY function, event_id) AS per"
                " GROUP BY function",
                (since,),
            ):
                extra.setdefault(name, {})["most"] = int(most)
            for name, n in conn.execute(
                "SELECT function, count(*) FROM oncefire_dedupe_hits WHERE at >= %s"
                " GROUP BY function",
                (since,),
            ):
                extra.setdefault(name, {})["dedupe"] = int(n)
        for name, values in extra.items():
            base = entry(name)
            out[name] = FunctionCounts(
                base.outcomes,
                base.durations,
                base.states,
                values.get("most", 0),
                values.get("dedupe", 0),
            )
        return out

    def delivery_states(self, event_id: str) -> list[tuple[str, str, int]]:
        rows = self._db.run(
            "SELECT function, state, attempt FROM oncefire_deliveries WHERE event_id = %s"
            " ORDER BY id",
            (event_id,),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def attempts(self, event_id: str) -> list[dict[str, Any]]:
        names = (
            "delivery_id",
            "function",
            "number",
            "worker",
            "started_at",
            "finished_at",
            "outcome",
            "error",
        )
        # Each delivery's attempts in order (one runs at a time): those that ended, then the
        # one running now (its row is written when it ends).
        rows = self._db.run(
            f"SELECT {', '.join(names)} FROM (SELECT 0 AS running, id AS n, {', '.join(names)}"
            " FROM oncefire_attempts WHERE event_id = %(id)s UNION ALL SELECT 1, 0, id,"
            " function, attempt, worker, claimed_at, NULL, NULL, NULL FROM oncefire_deliveries"
            " WHERE event_id = %(id)s AND state = 'running') AS a"
            " ORDER BY delivery_id, running, n",
            {"id": event_id},
        )
        return [dict(zip(names, row, strict=True)) for row in rows]

    def record_dedupe(self, function: str, now: float) -> None:
        self._db.run(
            "INSERT INTO oncefire_dedupe_hits (function, at) VALUES (%s, %s)", (function, now)
        )

    def purge_expired_claims(self, now: float, limit: int) -> int:
        rows = self._db.run(
            "WITH c AS (DELETE FROM oncefire_claims WHERE key IN (SELECT key FROM"
            " oncefire_claims WHERE expires_at <= %(now)s LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
            " RETURNING 1), i AS (DELETE FROM oncefire_idempotency WHERE key IN (SELECT key"
            " FROM oncefire_idempotency WHERE expires_at <= %(now)s AND lease_until <= %(now)s"
            " LIMIT %(limit)s FOR UPDATE SKIP LOCKED) RETURNING 1)"
            " SELECT (SELECT count(*) FROM c) + (SELECT count(*) FROM i)",
            {"now": now, "limit": limit},
        )
        return int(rows[0][0])

    # -- @idempotent records: one statement each, committed on its own -----------------
    # No lock is taken first: a second INSERT of a key waits on the first one's index entry,
    # and a guarded UPDATE or DELETE meeting a concurrent change re-checks its WHERE on the
    # row as that change left it, so each operation is atomic in READ COMMITTED.

    def claim_idempotency(self, record: IdempotencyRecord, now: float) -> bool:
        rows = self._db.run(
            "INSERT INTO oncefire_idempotency (key, function, status, token, payload_hash,"
            " lease_until, expires_at, result) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (key) DO UPDATE SET function = excluded.function,"
            " status = excluded.status, token = excluded.token,"
            " payload_hash = excluded.payload_hash, lease_until = excluded.lease_until,"
            " expires_at = excluded.expires_at, result = excluded.result"
            " WHERE oncefire_idempotency.expires_at <= %s",
            (*astuple(record), now),
        )
        return int(rows[0]) == 1

    def idempotency_record(self, key: str) -> IdempotencyRecord | None:
        rows = self._db.run(
            "SELECT key, function, status, token, payload_hash, lease_until, expires_at, result"
            " FROM oncefire_idempotency WHERE key = %s",
            (key,),
        )
        return IdempotencyRecord(*rows[0]) if rows else None

    def take_over_idempotency(
        self, record: IdempotencyRecord, stale_token: str, now: float
    ) -> bool:
        rows = self._db.run(
            "UPDATE oncefire_idempotency SET function = %s, status = %s, token = %s,"
            " payload_hash = %s, lease_until = %s, expires_at = %s, result = %s"
            " WHERE key = %s AND token = %s AND status = 'in_progress' AND lease_until <= %s",
            (*astuple(record)[1:], record.key, stale_token, now),
        )
        return int(rows[0]) == 1

    def complete_idempotency(
        self, key: str, token: str, now: float, expires_at: float, result_json: str | None
    ) -> bool:
        rows = self._db.run(
            "UPDATE oncefire_idempotency SET status = 'completed', lease_until = %s,"
            " expires_at = %s, result = %s WHERE key = %s AND token = %s",
            (now, expires_at, result_json, key, token),
        )
        return int(rows[0]) == 1

    def release_idempotency(self, key: str, token: str) -> bool:
        rows = self._db.run(
            "DELETE FROM oncefire_idempotency WHERE key = %s AND token = %s"
            " AND status = 'in_progress'",
            (key, token),
        )
        return int(rows[0]) == 1


def _claim_sql(has_ids: bool, *, has_caps: bool) -> str:
    """One statement that locks due deliveries (SKIP LOCKED: those other workers hold are
    passed over), makes them running under a fresh lease and returns them with their events
    (an attempt's row is written when it ends). Capped functions take at most their free
    slots. It is built from fixed fragments: no name is ever interpolated."""
    only = " AND id = ANY(%(ids)s::bigint[])" if has_ids else ""
    due = (
        "SELECT id, run_at FROM oncefire_deliveries WHERE state = 'pending'"
        f" AND run_at <= %(now)s AND function = ANY(%(free)s::text[]){only}"
        " ORDER BY run_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED"
    )
    if has_caps:
        capped = (
            "SELECT c.id, c.run_at FROM unnest(%(capped)s::text[], %(rooms)s::int[])"
            " AS f (name, room) CROSS JOIN LATERAL (SELECT id, run_at FROM oncefire_deliveries"
            f" WHERE state = 'pending' AND run_at <= %(now)s AND function = f.name{only}"
            " ORDER BY run_at, id LIMIT f.room FOR UPDATE SKIP LOCKED) AS c"
        )
        due = (
            f"SELECT id FROM (SELECT * FROM ({due}) AS a UNION ALL {capped}) AS u"
            " ORDER BY run_at, id LIMIT %(limit)s"
        )
    return (
        f"WITH due AS ({due}), taken AS (UPDATE oncefire_deliveries d SET state = 'running',"
        f" attempt = d.attempt + 1, lease_token = {_NEW_TOKEN}, lease_until = %(lease_until)s,"
        " worker = %(worker)s, claimed_at = %(now)s FROM due WHERE d.id = due.id"
        " RETURNING d.id, d.function, d.attempt, d.event_id, d.lease_token, d.run_at,"
        " d.replayed_at) SELECT t.id, t.function, t.attempt, t.lease_token, e.id, e.type,"
        " e.source, e.time, e.data, e.size, t.replayed_at FROM taken t JOIN oncefire_events e"
        " ON e.id = t.event_id ORDER BY t.run_at, t.id"
    )
