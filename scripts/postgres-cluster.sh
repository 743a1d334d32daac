#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for CI and the storage tests.
#
#   scripts/postgres-cluster.sh start DIR   # prints FERRY_TEST_POSTGRES_URL=... and FERRY_POSTGRES_URL=...
#   scripts/postgres-cluster.sh stop DIR    # stops the cluster and removes DIR
#
# `start` initialises a cluster in DIR (which must not exist or be empty) with the highest
# PostgreSQL version installed under /usr/lib/postgresql, password authentication
# (scram-sha-256) only, listening on 127.0.0.1 on a port the OS says is free (its unix socket
# in DIR), and creates the role `ferry` (no superuser: the server migrates its own schema as an
# ordinary owner, as in production) owning the databases `ferry` (the server's) and
# `ferry_conf` (the conformance suite's, which the tests empty). With
# FERRY_POSTGRES_CLUSTER_TLS=1 it also serves TLS with a certificate from a CA of its own
# (FERRY_TEST_POSTGRES_CA names the CA's PEM file). Only the variable lines go to stdout, so a caller can
# `eval "$(scripts/postgres-cluster.sh start DIR)"`; progress and errors go to stderr. Run as root, the cluster runs as the `postgres` OS user (initdb refuses
# root) and DIR is handed to it.
set -euo pipefail

MARKER=.ferry-postgres-cluster

die() { echo "postgres-cluster: $*" >&2; exit 1; }
say() { echo "postgres-cluster: $*" >&2; }

usage() { die "usage: $0 start DIR | stop DIR"; }

[[ $# -eq 2 ]] || usage
command=$1
dir=$2
[[ -n $dir ]] || usage

# The newest installed server version's binaries (Debian keeps each in its own directory).
pg_bin() {
    local bin
    bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    [[ -n $bin && -x $bin/initdb && -x $bin/pg_ctl ]] ||
        die "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin; install them with: apt-get install -y postgresql"
    echo "$bin"
}

# Runs a command as the cluster's OS user: `postgres` when we are root, else ourselves.
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# A TCP port nothing listens on right now (the OS picks it; a race is handled by retrying).
free_port() {
    command -v python3 >/dev/null || die "python3 is needed to pick a free port: apt-get install -y python3"
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

random_secret() { od -An -tx1 -N16 /dev/urandom | tr -d ' \n'; }

start() {
    local bin
    bin=$(pg_bin)
    command -v psql >/dev/null || [[ -x $bin/psql ]] || die "psql not found: apt-get install -y postgresql"
    if [[ -e $dir ]] && [[ -n $(ls -A "$dir") ]]; then
        die "$dir exists and is not empty (stop the cluster there first, or pick a new directory)"
    fi
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    # A unix socket path is limited to 107 bytes (DIR/.s.PGSQL.PORT).
    (( ${#dir} <= 80 )) || die "$dir is too long for a unix socket directory (at most 80 characters)"
    touch "$dir/$MARKER"

    if [[ $(id -u) -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || die "no 'postgres' OS user to run the cluster as: apt-get install -y postgresql"
        chown -R postgres: "$dir"
        runuser -u postgres -- test -w "$dir" ||
            die "the postgres OS user cannot write $dir (is a parent directory closed to other users?): pick a directory under /tmp"
    fi

    local superpw ferrypw
    superpw=$(random_secret)
    ferrypw=$(random_secret)
    (umask 077; printf '%s\n' "$superpw" >"$dir/superuser-password")
    [[ $(id -u) -ne 0 ]] || chown postgres: "$dir/superuser-password"

    say "initdb with $bin in $dir/data"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --pwfile="$dir/superuser-password" \
        --auth-local=scram-sha-256 --auth-host=scram-sha-256 -E UTF8 --no-locale --no-sync \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed (log above)"; }

    # TLS with a CA of the cluster's own when FERRY_POSTGRES_CLUSTER_TLS=1 (needs openssl): the
    # verify-full test connects against it (issue 22, point 8). The server's certificate names
    # 127.0.0.1 and localhost. Off by default: postgres-nio 1.x traps ("Can only add a ssl
    # handler after negotiation: .closed") when a connection closes while it negotiates TLS,
    # which the default sslmode=prefer does with every server that offers TLS; the store
    # tests that close connections early crashed the test process on a TLS cluster.
    local tls_options="" ca=""
    if [[ ${FERRY_POSTGRES_CLUSTER_TLS:-0} == 1 ]]; then
        command -v openssl >/dev/null || die "FERRY_POSTGRES_CLUSTER_TLS=1 needs openssl: apt-get install -y openssl"
        local tls=$dir/tls
        mkdir -p "$tls"
        (
            cd "$tls"
            openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3 -subj "/CN=Ferry test CA" 2>/dev/null
            openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=127.0.0.1" 2>/dev/null
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 3 -extfile san.ext 2>/dev/null
            chmod 600 server.key ca.key
        ) || die "could not make the cluster's TLS certificates with openssl"
        [[ $(id -u) -ne 0 ]] || chown -R postgres: "$tls"
        chmod 755 "$tls"
        chmod 644 "$tls/ca.pem"
        tls_options="-c ssl=on -c ssl_cert_file=$tls/server.pem -c ssl_key_file=$tls/server.key"
        ca=$tls/ca.pem
    fi

    local port="" attempt
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        say "starting on 127.0.0.1:$port (attempt $attempt)"
        if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400 $tls_options" start >&2; then
            break
        fi
        port=""
        say "the server did not start (port taken by someone else meanwhile?); last log lines:"
        tail -n 5 "$dir/postgres.log" >&2 || true
    done
    [[ -n $port ]] || die "could not start PostgreSQL after 5 attempts (see $dir/postgres.log)"
    echo "$port" >"$dir/port"

    local isready=pg_isready
    [[ -x $bin/pg_isready ]] && isready=$bin/pg_isready
    "$isready" -h 127.0.0.1 -p "$port" -t 30 >&2 || die "PostgreSQL on port $port did not accept connections within 30 s"

    local psql=psql
    [[ -x $bin/psql ]] && psql=$bin/psql
    # CREATEDB so that the two-node sync tests can make a database of their own per test (tests
    # run in parallel), CREATEROLE so that the backend test can make the role a backend writes
    # as (tests/backend); a server itself needs nothing beyond owning its database.
    PGPASSWORD=$superpw "$psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres >&2 <<SQL ||
CREATE ROLE ferry LOGIN NOSUPERUSER CREATEROLE CREATEDB PASSWORD '$ferrypw';
CREATE DATABASE ferry OWNER ferry;
CREATE DATABASE ferry_conf OWNER ferry;
SQL
        die "could not create the role ferry and its databases"

    local test_url="postgres://ferry:$ferrypw@127.0.0.1:$port/ferry_conf"
    local url="postgres://ferry:$ferrypw@127.0.0.1:$port/ferry"
    (umask 077; printf 'FERRY_TEST_POSTGRES_URL=%s\nFERRY_POSTGRES_URL=%s\n' "$test_url" "$url" >"$dir/env")
    say "ready on 127.0.0.1:$port (stop with: $0 stop $dir)"
    echo "FERRY_TEST_POSTGRES_URL=$test_url"
    echo "FERRY_POSTGRES_URL=$url"
    [[ -z $ca ]] || echo "FERRY_TEST_POSTGRES_CA=$ca"
}

stop() {
    [[ -d $dir ]] || { say "$dir does not exist: nothing to stop"; return 0; }
    # Never remove a directory this script did not make.
    [[ -e $dir/$MARKER ]] || die "$dir was not made by $0 start (no $MARKER): not removing it"
    if [[ -f $dir/data/postmaster.pid ]]; then
        local bin
        bin=$(pg_bin)
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >&2 || die "pg_ctl stop failed; $dir left in place"
    fi
    rm -rf "$dir"
    say "stopped and removed $dir"
}

case $command in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
