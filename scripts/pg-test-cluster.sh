#!/bin/sh
# Runs a command (the test runner) beside a private PostgreSQL cluster: initdb
# in a temporary directory, listening on a Unix socket there only, stopped and
# removed when the command ends; the command finds it in CLAWMEM_TEST_PG_DSN.
# The server comes from Debian (installed when missing); as root the cluster
# runs as user nobody, as PostgreSQL refuses to run as root. When no server
# can be had the command runs without one (the postgres tests then skip).
# CLAWMEM_PG_MAX_CONNECTIONS sets the server's max_connections (200).
# Usage: scripts/pg-test-cluster.sh COMMAND [ARG...]
set -u
find_bindir() {
    for d in "$(pg_config --bindir 2>/dev/null)" /usr/lib/postgresql/*/bin; do
        [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && { echo "$d"; return; }
    done
}
here=$(dirname "$0")
bindir=$(find_bindir)
if [ -z "$bindir" ]; then
    "$here/install-deps.sh" --pg >&2 || true
    bindir=$(find_bindir)
fi
if [ -z "$bindir" ]; then
    echo "pg-test-cluster: no PostgreSQL server; the postgres store's tests skip" >&2
    exec "$@"
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/clawmem-pg.XXXXXX") || exec "$@"
as=""
if [ "$(id -u)" = 0 ]; then
    chown nobody "$dir"
    as="runuser -u nobody --"
fi
stop() {
    $as "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1
    rm -rf "$dir"
}
if ! $as "$bindir/initdb" -D "$dir/data" -U clawmem -A trust --encoding=UTF8 --locale=C.UTF-8 \
        >"$dir/initdb.log" 2>&1 ||
    ! $as "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-k $dir -c listen_addresses= -c fsync=off -c max_connections=${CLAWMEM_PG_MAX_CONNECTIONS:-200}" start >/dev/null 2>&1; then
    echo "pg-test-cluster: the cluster did not start; the postgres store's tests skip:" >&2
    tail -5 "$dir/initdb.log" "$dir/server.log" >&2 2>/dev/null
    stop
    exec "$@"
fi
trap 'stop; exit 130' INT TERM
CLAWMEM_TEST_PG_DSN="host=$dir port=5432 user=clawmem dbname=postgres"
export CLAWMEM_TEST_PG_DSN
"$@"
rc=$?
stop
exit $rc
