# bench/load/scenarios.sh — the five scenarios of the load tool (bench/README.md, "Load").
# Sourced by bench/load/run, after servers.sh and workers.sh; each scenario function takes
# the store (sqlite, pg1, pg2), starts fresh servers, runs its workers, prints what it saw
# and one `RESULT scenario=... store=... key=value ...` line, and stops the servers.

results_file=$work/results
failures=0 # scenarios whose correctness checks failed (lost writes, errors, incomplete drain)

result() {
  echo "RESULT $*" | tee -a "$results_file"
}

# Figures from raw numbers (microseconds, counts, clock ticks, KB).
now_us() { date +%s%6N; }
seconds_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) / 1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }
per_second() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print "n/a" }'; }
cpu_pct() { awk -v t="$1" -v hz="$hz" -v s="$2" 'BEGIN { if (s > 0) printf "%.1f", t / hz / s * 100; else print "n/a" }'; }
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
verdict() { awk -v v="$1" -v t="$2" -v dir="$3" 'BEGIN { if (v == "n/a" || v == "") { print "n/a"; exit }
  ok = (dir == "le") ? (v + 0 <= t) : (v + 0 >= t); print ok ? "met" : "NOT_met" }'; }
# A key's value in a `k=v k=v` line.
kv() { printf '%s\n' "$2" | sed -nE "s/(^|.* )$1=([^ ]+).*/\2/p"; }

# The correctness checks every scenario makes; counts a failure and says why, with what the
# workers whose names start with PREFIX printed on stderr (their first sync errors...).
check_delivery() {
  local what=$1 prefix=$2 lost=$3 wrong=$4 extra=$5 short=$6 errors=$7 failed_writers=$8
  if [ "$lost" != 0 ] || [ "$wrong" != 0 ] || [ "$extra" != 0 ] || [ "$short" != 0 ] || [ "$errors" != 0 ] || [ "$failed_writers" != 0 ]; then
    echo "FAILED $what: lost=$lost wrong=$wrong extra=$extra observers_short=$short sync_errors=$errors failed_writers=$failed_writers"
    cat "$work/$prefix"*.err 2> /dev/null | sort | uniq -c | sort -rn | head -n 10 | sed 's/^/  workers said: /'
    failures=$((failures + 1))
  fi
}

# Pairs spread over the workers: spawn_pairs PREFIX K RATE → pair_names.
spawn_pairs() {
  local prefix=$1 k=$2 rate=$3 w i first count
  w=$workers
  [ "$w" -gt "$k" ] && w=$k
  pair_names=()
  for ((i = 0; i < w; i++)); do
    first=$((i * k / w)) count=$(((i + 1) * k / w - first))
    spawn_worker "$prefix-$i" pairs --url "$(writer_url)" --observer-url "$(observer_url)" --first "$first" --count "$count" \
      --rate "$rate" --parallel "$parallel" --timeout "$drain_timeout" --connect-timeout "$connect_timeout" ${writer_threads:+--threads "$writer_threads"}
    pair_names+=("$prefix-$i")
  done
}

# ---- idle: N devices connect and stay connected ------------------------------------------

scenario_idle() {
  local store=$1 n=$idle_devices per k first count names=() url
  # Each device holds about 8 descriptors in its worker (database files, the checkpoint
  # thread's connection, a socket), so a worker takes at most what its limit allows.
  per=$(((nofile - 200) / 9))
  [ "$per" -gt "$idle_per_worker" ] && per=$idle_per_worker
  local nw=$(((n + per - 1) / per))
  echo "== idle: $n devices on $store, $nw workers; then $idle_seconds s idle =="
  servers_up "$store" idle
  local rss0 cpu0 pgc0
  rss0=$(nodes_rss_kb) cpu0=$(nodes_cpu_ticks) pgc0=$(pg_cpu_ticks)
  for ((k = 0; k < nw; k++)); do
    first=$((k * n / nw)) count=$(((k + 1) * n / nw - first))
    url=${node_urls[k % ${#node_urls[@]}]} # two nodes: the workers alternate between them
    spawn_worker "idle-$store-$k" idle --url "$url" --first "$first" --count "$count" --parallel "$parallel" \
      --connect-timeout "$connect_timeout"
    names+=("idle-$store-$k")
  done
  wait_ready "$connect_timeout" "${names[@]}"
  local t0 t1 connect_s connections rss1 cpu1 pg1 clients1 rss2 cpu2 pg2 clients2 name
  t0=$(min_of ready:connect_start_us "${names[@]}") t1=$(max_of ready:connect_end_us "${names[@]}")
  connect_s=$(seconds_between "$t0" "$t1")
  connections=$(nodes_sync_connections)
  rss1=$(nodes_rss_kb) cpu1=$(nodes_cpu_ticks) pg1=$(pg_cpu_ticks) clients1=0
  for name in "${names[@]}"; do clients1=$((clients1 + $(cpu_ticks "${worker_pid[$name]}"))); done
  sleep "$idle_seconds" # the idle window being measured
  rss2=$(nodes_rss_kb) cpu2=$(nodes_cpu_ticks) pg2=$(pg_cpu_ticks) clients2=0
  for name in "${names[@]}"; do clients2=$((clients2 + $(cpu_ticks "${worker_pid[$name]}"))); done
  local pg_mem hwm
  pg_mem=$(pg_pss_kb) hwm=$(nodes_hwm_kb)
  signal_workers "${names[@]}"
  wait_exit 300 "${names[@]}"
  local connect login per_device
  connect=$("$bin/stats" summary connect --prefix connect_ $(samples_of "${names[@]}"))
  login=$("$bin/stats" summary login --prefix login_ $(samples_of "${names[@]}"))
  per_device=$(awk -v a="$rss0" -v b="$rss1" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }')
  echo "connected $n devices in $connect_s s ($(per_second "$n" "$connect_s") devices/s); the nodes report $connections sync connections"
  echo "  CPU while connecting: server $(cpu_pct $((cpu1 - cpu0)) "$connect_s")% of a core, clients $(cpu_pct "$clients1" "$connect_s")%$([ "$store" = sqlite ] || echo ", PostgreSQL $(cpu_pct $((pg1 - pgc0)) "$connect_s")%")"
  echo "  per device, login start -> subscription complete: p50 $(kv connect_p50_ms "$connect") ms, p99 $(kv connect_p99_ms "$connect") ms; login alone p50 $(kv login_p50_ms "$login") ms, p99 $(kv login_p99_ms "$login") ms"
  echo "  server RSS: $(mb "$rss0") MB before, $(mb "$rss1") MB connected = $per_device KB per device; $(mb "$rss2") MB after $idle_seconds s idle (peak $(mb "$hwm") MB)"
  echo "  idle CPU over $idle_seconds s: server $(cpu_pct $((cpu2 - cpu1)) "$idle_seconds")% of a core, clients $(cpu_pct $((clients2 - clients1)) "$idle_seconds")%$([ "$store" = sqlite ] || echo ", PostgreSQL $(cpu_pct $((pg2 - pg1)) "$idle_seconds")% (PSS $(mb "$pg_mem") MB)")"
  local errors
  errors=$(sum_of sync_errors "${names[@]}")
  if [ "$connections" != "?" ] && [ "$connections" != "$n" ]; then
    echo "FAILED idle on $store: $n devices connected but the nodes report $connections sync connections"
    failures=$((failures + 1))
  fi
  check_delivery "idle on $store" "idle-$store-" 0 0 0 0 "$errors" 0
  result "scenario=idle store=$store devices=$n workers=$nw connect_s=$connect_s devices_per_s=$(per_second "$n" "$connect_s")" \
    "$connect $login server_connect_cpu_pct=$(cpu_pct $((cpu1 - cpu0)) "$connect_s") clients_connect_cpu_pct=$(cpu_pct "$clients1" "$connect_s")" \
    "sync_connections=$connections server_rss_before_mb=$(mb "$rss0") server_rss_connected_mb=$(mb "$rss1")" \
    "server_kb_per_device=$per_device server_rss_after_idle_mb=$(mb "$rss2") server_peak_rss_mb=$(mb "$hwm") idle_s=$idle_seconds" \
    "server_idle_cpu_pct=$(cpu_pct $((cpu2 - cpu1)) "$idle_seconds") clients_idle_cpu_pct=$(cpu_pct $((clients2 - clients1)) "$idle_seconds")" \
    "postgres_idle_cpu_pct=$(cpu_pct $((pg2 - pg1)) "$idle_seconds") postgres_pss_mb=$(mb "$pg_mem") sync_errors=$errors" \
    "transient_errors=$(sum_of transient_errors "${names[@]}")" \
    "target_kb_per_device_le_40=$(verdict "$per_device" 40 le)"
  servers_down
}

# ---- active and firehose: writer/observer pairs --------------------------------------------

# run_pairs SCENARIO STORE K RATE SECONDS
run_pairs() {
  local scenario=$1 store=$2 k=$3 rate=$4 seconds=$5
  local how="at $rate write/s each"
  [ "$rate" = 0 ] && how="as fast as they can"
  echo "== $scenario: $k writer/observer pairs on $store, writers $how for $seconds s =="
  servers_up "$store" "$scenario"
  spawn_pairs "$scenario-$store" "$k" "$rate"
  local names=("${pair_names[@]}")
  wait_ready "$connect_timeout" "${names[@]}"
  local c0 c1 cpu0 pg0 cpu1 pg1 cpu2 pg2 rss1 w1 w2
  c0=$(min_of ready:connect_start_us "${names[@]}") c1=$(max_of ready:connect_end_us "${names[@]}")
  cpu0=$(nodes_cpu_ticks) pg0=$(pg_cpu_ticks)
  signal_workers "${names[@]}"
  # The active scenario: a backend follows the change feed (on the observers' node) and
  # times its own Data API inserts (on the writers' node) to their events, meanwhile.
  local probe_pid="" probe_out="$work/feedprobe-$scenario-$store.out"
  if [ "$scenario" = active ]; then
    python3 "$here/feedprobe.py" "$(observer_url)" "$(writer_url)" "$data_api_key" "$seconds" > "$probe_out" 2> "$probe_out.err" &
    probe_pid=$!
  fi
  sleep "$seconds" # the writing window being measured
  cpu1=$(nodes_cpu_ticks) pg1=$(pg_cpu_ticks) rss1=$(nodes_rss_kb) w1=$(now_us)
  signal_workers "${names[@]}"
  wait_exit $((drain_timeout + 300)) "${names[@]}"
  cpu2=$(nodes_cpu_ticks) pg2=$(pg_cpu_ticks) w2=$(now_us)
  local hwm
  hwm=$(nodes_hwm_kb)
  local feed=""
  if [ -n "$probe_pid" ]; then
    if wait "$probe_pid" && [ -s "$probe_out" ]; then feed=$(cat "$probe_out"); else
      echo "note: the change-feed probe failed: $(tail -n 3 "$probe_out.err")"
      feed="feed_lag_p99_ms=n/a feed_probe=failed"
    fi
  fi

  local start stop window written at_stop delivered acked_at_stop lost wrong extra short errors cw failed last drain
  start=$(min_of start_us "${names[@]}") stop=$(max_of stop_us "${names[@]}")
  window=$(seconds_between "$start" "$stop")
  written=$(sum_of written "${names[@]}") at_stop=$(sum_of delivered_at_stop "${names[@]}")
  delivered=$(sum_of delivered "${names[@]}") acked_at_stop=$(sum_of acked_at_stop "${names[@]}")
  lost=$(sum_of lost "${names[@]}") wrong=$(sum_of wrong "${names[@]}") extra=$(sum_of extra "${names[@]}")
  short=$(sum_of observers_short "${names[@]}") errors=$(sum_of sync_errors "${names[@]}")
  cw=$(sum_of compensating_writes "${names[@]}") failed=$(sum_of failed_writers "${names[@]}")
  last=$(max_of last_delivery_us "${names[@]}")
  if [ "$short" = 0 ]; then
    drain=$(awk -v l="$last" -v s="$stop" 'BEGIN { d = (l - s) / 1e6; printf "%.3f", (d > 0 ? d : 0) }')
  else
    drain="incomplete"
  fi
  local files notify ack commit lag
  files=$(samples_of "${names[@]}")
  notify=$("$bin/stats" summary notify --prefix notify_ $files)
  ack=$("$bin/stats" summary ack --prefix ack_ $files)
  commit=$("$bin/stats" summary commit --prefix commit_ $files)
  lag=$("$bin/stats" summary lag --prefix lag_ $files)
  if [ "$per_second_table" = 1 ]; then
    echo "per second of the run (by when the write began): writes, observers notified, write -> notification latency"
    "$bin/stats" per-second "$start" $files
  fi
  echo "connected $((2 * k)) devices in $(seconds_between "$c0" "$c1") s"
  echo "written $written in $window s ($(per_second "$written" "$window")/s); when the writers stopped, observers had $at_stop ($(ratio "$at_stop" "$written")) and the server had acknowledged $acked_at_stop ($(per_second "$acked_at_stop" "$window") changesets/s integrated)"
  echo "  write -> notification: p50 $(kv notify_p50_ms "$notify") ms, p99 $(kv notify_p99_ms "$notify") ms, max $(kv notify_max_ms "$notify") ms over $(kv notify_count "$notify") deliveries"
  echo "  write -> server acknowledgement: p50 $(kv ack_p50_ms "$ack") ms, p99 $(kv ack_p99_ms "$ack") ms; local commit p50 $(kv commit_p50_ms "$commit") ms, p99 $(kv commit_p99_ms "$commit") ms"
  [ "$rate" = 0 ] || echo "  generator lateness: p99 $(kv lag_p99_ms "$lag") ms, max $(kv lag_max_ms "$lag") ms"
  [ -z "$feed" ] || echo "  change feed meanwhile (a backend's insert every 100 ms, its answer -> its SSE event): p50 $(kv feed_lag_p50_ms "$feed") ms, p99 $(kv feed_lag_p99_ms "$feed") ms; $(kv feed_events "$feed") events streamed"
  echo "  drain after the stop: $drain s; delivered $delivered of $written; lost $lost, wrong $wrong, extra $extra (checked against what each writer committed)"
  echo "  server CPU while writing: $(cpu_pct $((cpu1 - cpu0)) "$window")% of a core$([ "$store" = sqlite ] || echo ", PostgreSQL $(cpu_pct $((pg1 - pg0)) "$window")%"); over the drain and the check ($(seconds_between "$w1" "$w2") s): $(cpu_pct $((cpu2 - cpu1)) "$(seconds_between "$w1" "$w2")")%; RSS $(mb "$rss1") MB at the stop, peak $(mb "$hwm") MB"
  check_delivery "$scenario on $store" "$scenario-$store-" "$lost" "$wrong" "$extra" "$short" "$errors" "$failed"
  local targets
  if [ "$scenario" = active ]; then
    local all_delivered=no
    [ "$short" = 0 ] && [ "$lost" = 0 ] && [ "$wrong" = 0 ] && all_delivered=yes
    targets="target_all_delivered=$([ $all_delivered = yes ] && echo met || echo 'NOT_met') target_p99_le_50ms=$(verdict "$(kv notify_p99_ms "$notify")" 50 le)"
    targets="$targets $feed target_feed_lag_p99_le_100ms=$(verdict "$(kv feed_lag_p99_ms "$feed")" 100 le)"
  else
    targets="target_delivered_ratio_ge_0.95=$(verdict "$(ratio "$at_stop" "$written")" 0.95 ge) target_integrated_ge_10000=$(verdict "$(per_second "$acked_at_stop" "$window")" 10000 ge)"
  fi
  result "scenario=$scenario store=$store pairs=$k rate=$rate seconds=$window written=$written written_per_s=$(per_second "$written" "$window")" \
    "delivered_at_stop=$at_stop delivered_ratio=$(ratio "$at_stop" "$written") integrated_per_s=$(per_second "$acked_at_stop" "$window")" \
    "$notify $ack $commit $([ "$rate" = 0 ] || echo "lag_p99_ms=$(kv lag_p99_ms "$lag") lag_max_ms=$(kv lag_max_ms "$lag")")" \
    "drain_s=$drain delivered=$delivered lost=$lost wrong=$wrong extra=$extra sync_errors=$errors compensating_writes=$cw" \
    "transient_errors=$(sum_of transient_errors "${names[@]}")" \
    "server_cpu_pct=$(cpu_pct $((cpu1 - cpu0)) "$window") postgres_cpu_pct=$(cpu_pct $((pg1 - pg0)) "$window")" \
    "server_rss_mb=$(mb "$rss1") server_peak_rss_mb=$(mb "$hwm") clients_cpu_s=$(sum_float cpu_s "${names[@]}") $targets"
  servers_down
}

scenario_active() { run_pairs active "$1" "$pairs" "$rate" "$active_seconds"; }
# One writer thread per worker unless --threads says otherwise: a thread per writer (100
# threads committing, each commit an fsync, on 2 cores) starves the workers' own sync threads,
# so nothing is uploaded until the writers stop, and the run measures the scheduler.
scenario_firehose() {
  local saved=$writer_threads
  writer_threads=${writer_threads:-1}
  run_pairs firehose "$1" "$firehose_writers" 0 "$firehose_seconds"
  writer_threads=$saved
}

# ---- fan-out: one writer, M observers of the same user --------------------------------------

scenario_fanout() {
  local store=$1 m=$fanout_observers rows=$fanout_rows names=() w i first count
  echo "== fanout: one writer, $m observers of one user on $store, $rows items in transactions of $fanout_batch =="
  servers_up "$store" fanout
  spawn_worker "fanout-$store-writer" fanout-writer --url "$(writer_url)" --rows "$rows" --batch "$fanout_batch" \
    --timeout "$drain_timeout" --connect-timeout "$connect_timeout"
  w=$workers
  [ "$w" -gt "$m" ] && w=$m
  for ((i = 0; i < w; i++)); do
    first=$((i * m / w)) count=$(((i + 1) * m / w - first))
    spawn_worker "fanout-$store-$i" fanout-observers --url "$(observer_url)" --first "$first" --count "$count" --rows "$rows" \
      --timeout "$drain_timeout" --connect-timeout "$connect_timeout"
    names+=("fanout-$store-$i")
  done
  wait_ready "$connect_timeout" "fanout-$store-writer" "${names[@]}"
  local cpu0 pg0 cpu1 pg1
  cpu0=$(nodes_cpu_ticks) pg0=$(pg_cpu_ticks)
  signal_workers "fanout-$store-writer" "${names[@]}"
  wait_exit $((drain_timeout + 120)) "fanout-$store-writer" "${names[@]}"
  cpu1=$(nodes_cpu_ticks) pg1=$(pg_cpu_ticks)
  local writer=$work/fanout-$store-writer.out start written acked last short lost wrong extra errors secs total notify hwm
  start=$(field start_us "$writer") written=$(field written_us "$writer") acked=$(field acked_us "$writer")
  last=$(max_of last_delivery_us "${names[@]}") short=$(sum_of observers_short "${names[@]}")
  lost=$(sum_of lost "${names[@]}") wrong=$(sum_of wrong "${names[@]}") extra=$(sum_of extra "${names[@]}")
  errors=$(($(sum_of sync_errors "${names[@]}") + $(field sync_errors "$writer")))
  secs=$(seconds_between "$start" "$last") total=$((m * rows))
  notify=$("$bin/stats" summary notify --prefix notify_ $(samples_of "${names[@]}"))
  hwm=$(nodes_hwm_kb)
  [ "$short" = 0 ] || secs=incomplete
  echo "written in $(seconds_between "$start" "$written") s, acknowledged after $(seconds_between "$start" "$acked") s; every observer had all $rows after $secs s"
  echo "  aggregate $(per_second "$total" "$secs") rows/s into $m devices ($(per_second "$rows" "$secs") rows/s each); write -> notification p50 $(kv notify_p50_ms "$notify") ms, p99 $(kv notify_p99_ms "$notify") ms"
  echo "  lost $lost, wrong $wrong, extra $extra; server CPU $(cpu_pct $((cpu1 - cpu0)) "$secs")%$([ "$store" = sqlite ] || echo ", PostgreSQL $(cpu_pct $((pg1 - pg0)) "$secs")%"), peak RSS $(mb "$hwm") MB"
  check_delivery "fanout on $store" "fanout-$store-" "$lost" "$wrong" "$extra" "$short" "$errors" "$(field failed_writers "$writer")"
  result "scenario=fanout store=$store observers=$m rows=$rows batch=$fanout_batch seconds=$secs rows_per_s=$(per_second "$total" "$secs")" \
    "rows_per_s_per_observer=$(per_second "$rows" "$secs") write_s=$(seconds_between "$start" "$written") acked_s=$(seconds_between "$start" "$acked")" \
    "$notify lost=$lost wrong=$wrong extra=$extra sync_errors=$errors" \
    "transient_errors=$(($(sum_of transient_errors "${names[@]}") + $(field transient_errors "$writer"))) server_cpu_pct=$(cpu_pct $((cpu1 - cpu0)) "$secs")" \
    "postgres_cpu_pct=$(cpu_pct $((pg1 - pg0)) "$secs") server_peak_rss_mb=$(mb "$hwm")" \
    "target_rows_per_s_ge_250000=$(verdict "$(per_second "$total" "$secs")" 250000 ge)"
  servers_down
}

# ---- bootstrap: a fresh device downloads N objects while K writers write --------------------

scenario_bootstrap() {
  local store=$1 k=$bootstrap_writers rows=$bootstrap_rows boot
  echo "== bootstrap: a fresh device downloads $rows items on $store while $k pairs write at $bootstrap_rate/s each =="
  servers_up "$store" bootstrap
  spawn_pairs "bootstrap-$store" "$k" "$bootstrap_rate"
  local names=("${pair_names[@]}")
  boot="bootstrap-$store-device"
  spawn_worker "$boot" bootstrap --url "$(writer_url)" --observer-url "$(observer_url)" --rows "$rows" \
    --baseline "$bootstrap_baseline" --timeout "$drain_timeout" --connect-timeout "$connect_timeout"
  wait_ready "$connect_timeout" "${names[@]}" "$boot"
  local cpu0 pg0 cpu1 pg1
  cpu0=$(nodes_cpu_ticks) pg0=$(pg_cpu_ticks)
  signal_workers "${names[@]}" "$boot"
  wait_line $((${bootstrap_baseline%.*} + drain_timeout + 60)) "$boot" WORKER
  sleep 1 # writes keep going a moment after the bootstrap, so that its window is not the run's edge
  cpu1=$(nodes_cpu_ticks) pg1=$(pg_cpu_ticks)
  signal_workers "${names[@]}"
  wait_exit $((drain_timeout + 300)) "${names[@]}" "$boot"

  local out=$work/$boot.out start b0 b1 files before during boot_s
  start=$(min_of start_us "${names[@]}")
  b0=$(field bootstrap_start_us "$out") b1=$(field bootstrap_end_us "$out") boot_s=$(field bootstrap_s "$out")
  files=$(samples_of "${names[@]}")
  # The baseline leaves out the writers' first second (connections warming up).
  before=$("$bin/stats" summary notify --from $((start + 1000000)) --to "$b0" --prefix before_ $files)
  during=$("$bin/stats" summary notify --from "$b0" --to "$b1" --prefix during_ $files)
  local raise lost wrong extra short errors boot_lost
  raise=$(awk -v a="$(kv before_p99_ms "$before")" -v b="$(kv during_p99_ms "$during")" \
    'BEGIN { if (a == "n/a" || b == "n/a") print "n/a"; else printf "%.2f", b - a }')
  lost=$(sum_of lost "${names[@]}") wrong=$(sum_of wrong "${names[@]}") extra=$(sum_of extra "${names[@]}")
  short=$(sum_of observers_short "${names[@]}") errors=$(($(sum_of sync_errors "${names[@]}") + $(field sync_errors "$out")))
  boot_lost=$(($(field lost "$out") + $(field wrong "$out") + $(field extra "$out")))
  echo "preloaded $rows items in $(field preload_s "$out") s; the bootstrap took $boot_s s ($(per_second "$rows" "$boot_s") rows/s), the fresh device's peak RSS $(mb "$(field bootstrap_peak_rss_kb "$out")") MB"
  echo "  writers' write -> notification before it: p50 $(kv before_p50_ms "$before") ms, p99 $(kv before_p99_ms "$before") ms ($(kv before_count "$before") writes)"
  echo "  during it: p50 $(kv during_p50_ms "$during") ms, p99 $(kv during_p99_ms "$during") ms, max $(kv during_max_ms "$during") ms ($(kv during_count "$during") writes): p99 raised by $raise ms"
  echo "  lost $lost, wrong $wrong, extra $extra; the bootstrapped device: $(field found "$out") of $rows right"
  check_delivery "bootstrap on $store" "bootstrap-$store-" "$((lost + boot_lost))" "$wrong" "$extra" "$short" "$errors" "$(sum_of failed_writers "${names[@]}")"
  result "scenario=bootstrap store=$store rows=$rows writers=$k rate=$bootstrap_rate preload_s=$(field preload_s "$out") bootstrap_s=$boot_s" \
    "bootstrap_rows_per_s=$(per_second "$rows" "$boot_s") bootstrap_peak_rss_mb=$(mb "$(field bootstrap_peak_rss_kb "$out")") $before $during" \
    "p99_raise_ms=$raise lost=$lost wrong=$wrong extra=$extra bootstrap_lost=$boot_lost sync_errors=$errors" \
    "transient_errors=$(($(sum_of transient_errors "${names[@]}") + $(field transient_errors "$out")))" \
    "server_cpu_pct=$(cpu_pct $((cpu1 - cpu0)) "$(seconds_between "$start" "$b1")") postgres_cpu_pct=$(cpu_pct $((pg1 - pg0)) "$(seconds_between "$start" "$b1")")" \
    "server_peak_rss_mb=$(mb "$(nodes_hwm_kb)") target_p99_raise_le_20ms=$(verdict "$raise" 20 le)"
  servers_down
}
