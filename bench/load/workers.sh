# bench/load/workers.sh — starting the load workers, stepping them through a scenario
# (control.h: a READY line, then one SIGUSR1 per phase) and reading their WORKER lines.
# Sourced by bench/load/run; uses its variables: work, bin, jwt_key, auth.

declare -A worker_pid=()

# spawn_worker NAME ROLE ARGS...: one `load` process with its own directory, output and
# samples file under $work.
spawn_worker() {
  local name=$1 role=$2
  shift 2
  mkdir -p "$work/$name"
  jwtSigningKey=$jwt_key "$bin/load" "$role" --dir "$work/$name" --samples "$work/$name.samples" --auth "$auth" "$@" \
    > "$work/$name.out" 2> "$work/$name.err" &
  worker_pid[$name]=$!
}

# Prints the end of each named worker's stderr, kills every worker, fails the run.
workers_fail() {
  local message=$1 name
  shift
  echo "load: $message" >&2
  for name in "$@"; do
    if [ -s "$work/$name.err" ]; then
      echo "--- $name (stderr, last lines):" >&2
      tail -n 15 "$work/$name.err" >&2
    fi
  done
  exit 1
}

# wait_ready TIMEOUT NAME...: until every named worker printed READY; fails if one exits or
# the timeout passes.
wait_ready() {
  local timeout=$1 name ready deadline
  shift
  deadline=$(($(date +%s) + timeout))
  while :; do
    ready=0
    for name in "$@"; do
      if grep -q '^READY' "$work/$name.out" 2> /dev/null; then
        ready=$((ready + 1))
      elif ! kill -0 "${worker_pid[$name]}" 2> /dev/null; then
        workers_fail "worker $name exited before it was ready" "$name"
      fi
    done
    [ "$ready" -eq $# ] && return 0
    [ "$(date +%s)" -lt "$deadline" ] || workers_fail "workers not ready within $timeout s ($ready of $# ready)" "$@"
    sleep 0.1
  done
}

# signal_workers NAME...: the next phase, for all of them at once.
signal_workers() {
  local name
  for name in "$@"; do kill -USR1 "${worker_pid[$name]}"; done
}

# wait_exit TIMEOUT NAME...: until every named worker has ended; fails on a timeout or an
# exit status other than 0.
wait_exit() {
  local timeout=$1 name alive deadline
  shift
  deadline=$(($(date +%s) + timeout))
  while :; do
    alive=0
    for name in "$@"; do kill -0 "${worker_pid[$name]}" 2> /dev/null && alive=$((alive + 1)); done
    [ "$alive" -eq 0 ] && break
    [ "$(date +%s)" -lt "$deadline" ] || workers_fail "workers still running after $timeout s" "$@"
    sleep 0.1
  done
  local status pipes transient
  pipes=$(sum_of sigpipes "$@")
  [ "${pipes:-0}" = 0 ] || echo "note: $pipes SIGPIPE(s) in the workers: libferry wrote to sockets the server had closed (counted, not fatal, in the workers; a host that keeps the default action dies of it)"
  transient=$(sum_of transient_errors "$@")
  [ "${transient:-0}" = 0 ] || echo "note: the server sent $transient transient sync error(s) (try again; the devices reconnected), the first ones: $(cat $(printf "$work/%s.err " "$@") 2> /dev/null | grep -m 3 'transient sync error' | tr '\n' ' ')"
  for name in "$@"; do
    status=0
    wait "${worker_pid[$name]}" || status=$?
    [ "$status" -eq 0 ] || workers_fail "worker $name failed (exit status $status$([ "$status" -gt 128 ] && echo ": signal $(kill -l $((status - 128)))"))" "$name"
    unset "worker_pid[$name]"
  done
}

# Waits until the named worker's output has a line starting with PREFIX (or it exits).
wait_line() {
  local timeout=$1 name=$2 prefix=$3 deadline
  deadline=$(($(date +%s) + timeout))
  until grep -q "^$prefix" "$work/$name.out" 2> /dev/null; do
    kill -0 "${worker_pid[$name]}" 2> /dev/null || return 0
    [ "$(date +%s)" -lt "$deadline" ] || workers_fail "no $prefix line from $name within $timeout s" "$name"
    sleep 0.1
  done
}

# field KEY FILE...: KEY's values on the WORKER (or READY) lines of the files, one a line.
# A KEY of READY lines is asked for as ready:KEY.
field() {
  local key=$1 kind=WORKER
  shift
  case $key in ready:*) kind=READY key=${key#ready:} ;; esac
  cat "$@" 2> /dev/null | sed -nE "s/^$kind .*[ ]$key=([^ ]+).*/\1/p"
}
# Over the named workers' output files.
outs() { local n; for n in "$@"; do printf '%s\n' "$work/$n.out"; done; }
sum_of() { local key=$1; shift; field "$key" $(outs "$@") | awk '{ t += $1 } END { printf "%.0f", t }'; }
sum_float() { local key=$1; shift; field "$key" $(outs "$@") | awk '{ t += $1 } END { printf "%.2f", t }'; }
max_of() { local key=$1; shift; field "$key" $(outs "$@") | sort -n | tail -1; }
min_of() { local key=$1; shift; field "$key" $(outs "$@") | sort -n | head -1; }
samples_of() { local n; for n in "$@"; do printf '%s\n' "$work/$n.samples"; done; }
