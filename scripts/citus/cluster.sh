#!/usr/bin/env bash
# A Citus cluster on loopback for trying SynaptoMind on it: a coordinator and two workers of Debian's PostgreSQL 15
# with Citus and pgvector (scripts/citus/build.sh installs them).
#   scripts/citus/cluster.sh start   # prints the database URL of the coordinator
#   scripts/citus/cluster.sh stop
# CITUS_DIR (default /tmp/synapto-citus) holds the three data folders; CITUS_PORT the coordinator's port (workers
# take the next two). Runs the servers as the `postgres` system user when started as root.
set -euo pipefail
dir=${CITUS_DIR:-/tmp/synapto-citus}
port=${CITUS_PORT:-5701}
bin=/usr/lib/postgresql/15/bin
nodes=(coordinator worker1 worker2)
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

start() {
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  local i=0
  for node in "${nodes[@]}"; do
    local data="$dir/$node" node_port=$((port + i))
    if [ ! -d "$data" ]; then
      as_postgres "$bin/initdb" -D "$data" -U postgres -A trust --no-sync -E UTF8 >/dev/null
      cat >>"$data/postgresql.conf" <<CONF
port = $node_port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_preload_libraries = 'citus'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 256MB
citus.enable_unsafe_triggers = on
# The distributed tables have foreign keys to reference tables (project): Citus then needs a transaction's
# multi-shard writes over one connection per node, or a later write to a reference table is refused.
citus.multi_shard_modify_mode = 'sequential'
# The HNSW settings the service sets per connection (app.db.vector) stay on the coordinator's connection; the
# shards walk the graphs, so they get them here, and a transaction's SET LOCAL (a wider ef_search) is passed on.
hnsw.iterative_scan = relaxed_order
hnsw.ef_search = 200  # app.db.vector.HNSW_EF_SEARCH
citus.propagate_set_commands = 'local'
CONF
    fi
    as_postgres "$bin/pg_ctl" -D "$data" -l "$dir/$node.log" -w status >/dev/null 2>&1 \
      || as_postgres "$bin/pg_ctl" -D "$data" -l "$dir/$node.log" -w start >/dev/null
    i=$((i + 1))
  done
  local psql="$bin/psql -X -q -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1"
  for i in 0 1 2; do
    $psql -p $((port + i)) -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'synapto'" | grep -q 1 \
      || $psql -p $((port + i)) -d postgres -c "CREATE DATABASE synapto"
    # Once a worker is in the cluster it refuses DDL, even a no-op IF NOT EXISTS: a restart skips this.
    $psql -p $((port + i)) -d synapto -tAc "SELECT count(*) FROM pg_extension WHERE extname IN ('citus', 'vector')" \
      | grep -q 2 || $psql -p $((port + i)) -d synapto -c "CREATE EXTENSION IF NOT EXISTS citus; CREATE EXTENSION IF NOT EXISTS vector"
  done
  $psql -p "$port" -d synapto -c "SELECT citus_set_coordinator_host('127.0.0.1', $port)" >/dev/null
  for i in 1 2; do
    $psql -p "$port" -d synapto -tAc "SELECT 1 FROM pg_dist_node WHERE nodeport = $((port + i))" | grep -q 1 \
      || $psql -p "$port" -d synapto -c "SELECT citus_add_node('127.0.0.1', $((port + i)))" >/dev/null
  done
  echo "postgresql+asyncpg://postgres@127.0.0.1:$port/synapto"
}

stop() {
  for node in "${nodes[@]}"; do
    [ -d "$dir/$node" ] && as_postgres "$bin/pg_ctl" -D "$dir/$node" -m fast -w stop >/dev/null 2>&1 || true
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
