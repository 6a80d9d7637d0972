#!/bin/bash
# The server's side of a document write on PostgreSQL, without Python: pgbench (prepared
# statements) calls oncefire_set_document (the one-statement write, one function registered,
# so one delivery a write) against a raw one-row INSERT of the same JSON and against the same
# rows as the write (document, event, delivery) by one plain statement, alternately, on a
# store migrated by this checkout: the write while no worker sleeps, and while one does (a row
# in oncefire_sleepers), when it notifies. PostgreSQL holds a database-wide lock from a
# notifying transaction's commit to its end, so such commits do not share their WAL flushes
# (migration 026: writes notify only while a worker sleeps).
#   bench/pg_server_write.sh [--schema-23-float] [--clients N] [rounds] [seconds]
# --schema-23-float first puts back the float formatter of schemas 6 to 23 (not inlined), to
# measure migration 024 against it on the same server.
set -euo pipefail
old_float=0
clients=1
while [ $# -gt 0 ]; do
    case "$1" in
        --schema-23-float) old_float=1; shift ;;
        --clients) clients=$2; shift 2 ;;
        *) break ;;
    esac
done
rounds=${1:-3}
seconds=${2:-6}
port=${BENCH_PG_PORT:-5432}
db=oncefire_bench_server_write
url="postgresql://postgres@127.0.0.1:$port/$db"
psql=(psql -h 127.0.0.1 -p "$port" -U postgres -qAt)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${psql[@]}" postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" 2>/dev/null
python - "$url" <<'PY'
import sys

from oncefire import App

app = App(sys.argv[1])


@app.on_document_written("c/{id}")
def fn(event): ...


app.db.document("c/first").set({"a": 1})
app.close()
PY
if [ "$old_float" = 1 ]; then
    "${psql[@]}" "$db" -c "CREATE OR REPLACE FUNCTION oncefire_json_float(x double precision)
        RETURNS text LANGUAGE sql IMMUTABLE AS \$\$ SELECT CASE WHEN t ~ '^-?[0-9]+\$'
        THEN t || '.0' ELSE t END FROM (SELECT x::text AS t) AS s \$\$"
fi
"${psql[@]}" "$db" -c "CREATE TABLE raw_writes (k bigint PRIMARY KEY, data jsonb)"
catalog=$("${psql[@]}" "$db" -c "SELECT version FROM oncefire_catalog")
function=$("${psql[@]}" "$db" -c "SELECT name FROM oncefire_functions")
cat > "$work/write.sql" <<SQL
\set k random(1, 2000000000)
SELECT oncefire_set_document(:k, 'c/' || :k, 'c', '{"a":1}', extract(epoch FROM now()),
    $catalog, gen_random_uuid()::text, 'document.created', 'document.updated',
    '{$function}', '{$function}', NULL, NULL, 'oncefire', 50);
SQL
# The rows of a write (bench/plain_sql.py's POSTGRES_ROWS), their JSON built in the statement.
cat > "$work/rows.sql" <<SQL
WITH ids AS (SELECT gen_random_uuid()::text AS id),
doc AS (SELECT jsonb_build_object('a', 1) AS data),
d AS (INSERT INTO oncefire_documents (path, collection, data, create_time, update_time,
        data_size)
    SELECT 'c/' || id, 'c', data, 1.5, 1.5, 7 FROM ids, doc),
e AS (INSERT INTO oncefire_events (id, type, source, time, data, size)
    SELECT id, 'document.created', 'c/' || id, 1.5, jsonb_build_object('before', NULL,
        'after', jsonb_build_object('data', data, 'create_time', 1.5, 'update_time', 1.5)),
        70
    FROM ids, doc)
INSERT INTO oncefire_deliveries (event_id, function, state, run_at, created_at)
SELECT id, '$function', 'pending', 1.5, 1.5 FROM ids;
SQL
cat > "$work/raw.sql" <<SQL
\set k random(1, 2000000000)
INSERT INTO raw_writes VALUES (:k, '{"a":1}') ON CONFLICT DO NOTHING;
SQL
echo "$clients client(s), ${seconds} s a measure"
sleeping="INSERT INTO oncefire_sleepers VALUES (0, 0)"  # a worker asleep, as far as writes see
for round in $(seq "$rounds"); do
    for measure in raw rows write write_while_one_sleeps; do
        "${psql[@]}" "$db" -c "DELETE FROM oncefire_sleepers" -c CHECKPOINT
        script=$measure
        if [ "$measure" = write_while_one_sleeps ]; then
            "${psql[@]}" "$db" -c "$sleeping"
            script=write
        fi
        out=$(pgbench -n -M prepared -c "$clients" -j "$(( clients < 2 ? 1 : 2 ))" \
            -h 127.0.0.1 -p "$port" -U postgres -T "$seconds" -f "$work/$script.sql" "$db")
        tps=$(sed -n 's/^tps = \([0-9]*\).*/\1/p' <<< "$out")
        ms=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<< "$out")
        echo "round $round $measure: $tps transactions/s, $ms ms each"
    done
done
"${psql[@]}" postgres -c "DROP DATABASE $db"
