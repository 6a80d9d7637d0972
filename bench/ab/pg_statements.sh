#!/bin/bash
# The server's time per statement of an in-process per-event drain (bench/ab/pg_drain.py
# --per-event) of one tree of src, from pg_stat_statements. Needs a PostgreSQL server with the
# extension preloaded (shared_preload_libraries = 'pg_stat_statements'), e.g. a private
# cluster: BENCH_PG_PORT=55432 bench/ab/pg_statements.sh <tree> [events]
set -euo pipefail
tree=$1
n=${2:-2000}
port=${BENCH_PG_PORT:-5432}
psql=(psql -h 127.0.0.1 -p "$port" -U postgres -qAt)
"${psql[@]}" postgres -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
"${psql[@]}" postgres -c "SELECT pg_stat_statements_reset()" >/dev/null
BENCH_DB_SUFFIX=_ab PYTHONPATH="$tree/src" python "$(dirname "$0")/pg_drain.py" --n "$n" --per-event | tail -1
"${psql[@]}" postgres -F ' | ' -c "
SELECT calls, round((total_exec_time / calls * 1000)::numeric, 1) AS us_a_call,
    round(shared_blks_hit::numeric / calls, 1) AS hits, round(wal_bytes::numeric / calls) AS wal,
    left(regexp_replace(query, '\s+', ' ', 'g'), 60)
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = 'oncefire_bench_ab' AND calls >= $n / 2 ORDER BY total_exec_time DESC LIMIT 8"
