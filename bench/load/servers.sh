# bench/load/servers.sh — the servers under load, and what /proc says about them.
# Sourced by bench/load/run; uses its variables: root, work, server_bin, jwt_key, admin_token.
#
# Each scenario gets fresh servers (and on PostgreSQL a fresh database), so that no scenario
# sees another's users or objects and the memory figures start from an idle server:
#   sqlite  one ferry-server with its embedded SQLite store
#   pg1     one ferry-server on PostgreSQL
#   pg2     two ferry-server nodes on one PostgreSQL database (writers on node 1, observers
#           and the bootstrap's fresh device on node 2)

server_pids=()   # every ferry-server started, for cleanup
declare -A node_logs=() # pid -> its log file
node_log() { echo "${node_logs[$1]}"; }
node_pids=()     # the current scenario's nodes
node_urls=()
pg_cluster=""    # the PostgreSQL cluster's directory once started
pg_base_url=""   # postgres://ferry:...@127.0.0.1:PORT (no database)
scenario_db=""   # the current scenario's database on PostgreSQL

# Starts the throwaway cluster once (scripts/postgres-cluster.sh). Its directory is beside
# $work, not in it: run as root, the cluster runs as the postgres OS user, which cannot enter
# $work (mode 0700).
pg_start() {
  [ -n "$pg_cluster" ] && return 0
  pg_cluster=$(mktemp -d "${TMPDIR:-/tmp}/ferry-load-pg-XXXXXX")
  chmod 755 "$pg_cluster"
  local env
  if ! env=$("$root/scripts/postgres-cluster.sh" start "$pg_cluster/c" 2> "$work/postgres-cluster.log"); then
    cat "$work/postgres-cluster.log" >&2
    echo "load: could not start a PostgreSQL cluster (output above); install PostgreSQL (apt-get install -y postgresql) or pass --stores sqlite" >&2
    exit 1
  fi
  local url
  url=$(printf '%s\n' "$env" | sed -n 's/^FERRY_POSTGRES_URL=//p')
  pg_base_url=${url%/*}
}

pg_stop() {
  [ -n "$pg_cluster" ] || return 0
  "$root/scripts/postgres-cluster.sh" stop "$pg_cluster/c" > /dev/null 2>&1 || true
  rmdir "$pg_cluster" 2> /dev/null || true
  pg_cluster=""
}

# The example app with a Data API server key (the active scenario's change-feed probe).
data_api_key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
load_app() {
  [ -d "$work/app" ] && return 0
  cp -r "$root/examples/item-app" "$work/app"
  mkdir -p "$work/app/http_endpoints"
  echo '{"disabled": false, "server_keys": [{"name": "load", "secret_name": "FERRY_DATA_API_KEY_LOAD"}]}' > "$work/app/http_endpoints/data_api_config.json"
}

# Starts one node (more arguments go to ferry-server); sets started_pid and started_url.
start_node() {
  local name=$1
  shift
  rm -f "$work/$name.port"
  load_app
  jwtSigningKey=$jwt_key FERRY_ADMIN_TOKEN=$admin_token FERRY_DATA_API_KEY_LOAD=$data_api_key "$server_bin" \
    --app-dir "$work/app" --data "$work/$name" --port 0 --port-file "$work/$name.port" --log-level warning \
    --signups-per-minute 1000000 --address-free-failures 1000000 "$@" > "$work/$name.log" 2>&1 &
  # The per-address sign-up and login budgets do not apply to loopback clients unless the
  # server is told so (--limit-loopback); the flags above keep a load run independent of that
  # default. Logins are custom JWTs by default, so password hashing is not in the way either.
  started_pid=$!
  server_pids+=("$started_pid")
  node_logs[$started_pid]=$work/$name.log
  local _
  for _ in $(seq 600); do
    [ -s "$work/$name.port" ] && break
    kill -0 "$started_pid" 2> /dev/null || break
    sleep 0.1
  done
  if [ ! -s "$work/$name.port" ]; then
    echo "load: ferry-server $name did not start within 60 s; its log:" >&2
    cat "$work/$name.log" >&2
    exit 1
  fi
  started_url="http://127.0.0.1:$(cat "$work/$name.port")"
}

# Fresh servers for scenario $2 on store $1: node_pids and node_urls (one or two nodes).
servers_up() {
  local store=$1 scenario=$2
  node_pids=() node_urls=()
  case $store in
    sqlite)
      start_node "$scenario-sqlite"
      node_pids=("$started_pid") node_urls=("$started_url")
      ;;
    pg1 | pg2)
      pg_start
      scenario_db="load_${scenario}_$store"
      PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$pg_base_url/ferry" \
        -c "DROP DATABASE IF EXISTS $scenario_db" -c "CREATE DATABASE $scenario_db"
      # Node 1 first: it migrates the database, node 2 finds it done.
      start_node "$scenario-$store-node1" --database "$pg_base_url/$scenario_db" --database-connections "${FERRY_LOAD_DB_CONNECTIONS:-20}"
      node_pids=("$started_pid") node_urls=("$started_url")
      if [ "$store" = pg2 ]; then
        start_node "$scenario-$store-node2" --database "$pg_base_url/$scenario_db" --database-connections "${FERRY_LOAD_DB_CONNECTIONS:-20}"
        node_pids+=("$started_pid") node_urls+=("$started_url")
      fi
      ;;
    *)
      echo "load: unknown store $store (sqlite, pg1, pg2)" >&2
      exit 2
      ;;
  esac
}

# Stops the scenario's nodes; a node that is no longer running crashed during the scenario:
# that fails the run (node_failures), with the end of its log.
node_failures=0
servers_down() {
  local pid status i
  for i in "${!node_pids[@]}"; do
    pid=${node_pids[$i]}
    if kill -0 "$pid" 2> /dev/null; then
      kill "$pid"
      status=0
      wait "$pid" 2> /dev/null || status=$?
      # SIGTERM stops a node cleanly (docs/server-config.md): anything else is worth a line.
      [ "$status" -eq 0 ] || [ "$status" -eq 143 ] ||
        echo "note: ferry-server node $((i + 1)) exited with status $status$([ "$status" -gt 128 ] && echo " (signal $(kill -l $((status - 128))))") when stopped with SIGTERM"
    else
      status=0
      wait "$pid" 2> /dev/null || status=$?
      echo "FAILED: ferry-server node $((i + 1)) ended by itself during the scenario (exit status $status$([ "$status" -gt 128 ] && echo ": signal $(kill -l $((status - 128)))")); its log ends:"
      tail -n 20 "$(node_log "$pid")" 2> /dev/null || true
      node_failures=$((node_failures + 1))
    fi
  done
  if [ -n "$scenario_db" ]; then
    psql -X -q "$pg_base_url/ferry" -c "DROP DATABASE IF EXISTS $scenario_db WITH (FORCE)" > /dev/null 2>&1 || true
    scenario_db=""
  fi
  node_pids=() node_urls=()
}

# The URL writers use (node 1), and the one observers use (node 2 when there are two).
writer_url() { echo "${node_urls[0]}"; }
observer_url() { echo "${node_urls[${#node_urls[@]} - 1]}"; }

# ---- /proc readings ----------------------------------------------------------------------
hz=$(getconf CLK_TCK)
# CPU time of a process so far in clock ticks (user + system, all its threads).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }
# The nodes together.
nodes_cpu_ticks() { local p t=0; for p in "${node_pids[@]}"; do t=$((t + $(cpu_ticks "$p"))); done; echo "$t"; }
nodes_rss_kb() { local p t=0; for p in "${node_pids[@]}"; do t=$((t + $(rss_kb "$p"))); done; echo "$t"; }
nodes_hwm_kb() { local p t=0; for p in "${node_pids[@]}"; do t=$((t + $(hwm_kb "$p"))); done; echo "$t"; }
# The whole PostgreSQL cluster: the postmaster with its exited children, plus its live
# backends; 0 without a cluster.
pg_cpu_ticks() {
  [ -n "$pg_cluster" ] && [ -f "$pg_cluster/c/data/postmaster.pid" ] || { echo 0; return; }
  local postmaster child
  postmaster=$(head -1 "$pg_cluster/c/data/postmaster.pid")
  {
    awk '{ print $14 + $15 + $16 + $17 }' "/proc/$postmaster/stat"
    for child in $(pgrep -P "$postmaster"); do awk '{ print $14 + $15 }' "/proc/$child/stat" 2> /dev/null || true; done
  } | awk '{ t += $1 } END { print t + 0 }'
}
# Its memory: the proportional set size (shared buffers counted once, not per backend).
pg_pss_kb() {
  [ -n "$pg_cluster" ] && [ -f "$pg_cluster/c/data/postmaster.pid" ] || { echo 0; return; }
  local postmaster pid
  postmaster=$(head -1 "$pg_cluster/c/data/postmaster.pid")
  for pid in "$postmaster" $(pgrep -P "$postmaster"); do
    awk '/^Pss:/ { print $2 }' "/proc/$pid/smaps_rollup" 2> /dev/null || true
  done | awk '{ t += $1 } END { print t + 0 }'
}
# Open sync connections per the nodes' admin API, summed ("?" without curl).
nodes_sync_connections() {
  command -v curl > /dev/null || { echo "?"; return; }
  local url t=0 n
  for url in "${node_urls[@]}"; do
    n=$(curl -sf -H "Authorization: Bearer $admin_token" "$url/api/admin/v1/sync" | sed -nE 's/.*"connections":([0-9]+).*/\1/p')
    t=$((t + ${n:-0}))
  done
  echo "$t"
}
