#!/bin/sh
# Joins the workers to the coordinator, once each (citus_add_node of a node already there returns its id).
set -eu
for host in citus-coordinator citus-worker-1 citus-worker-2; do
  until pg_isready -q -h "$host" -U "$POSTGRES_USER" -d "$POSTGRES_DB"; do sleep 1; done
done
psql -v ON_ERROR_STOP=1 -h citus-coordinator -U "$POSTGRES_USER" -d "$POSTGRES_DB" <<'SQL'
SELECT citus_set_coordinator_host('citus-coordinator', 5432);
SELECT citus_add_node('citus-worker-1', 5432);
SELECT citus_add_node('citus-worker-2', 5432);
SELECT nodename, nodeport, noderole FROM pg_dist_node ORDER BY nodeid;
SQL
echo "Citus cluster ready: coordinator on localhost:5433"
