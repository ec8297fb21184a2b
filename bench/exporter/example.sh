#!/usr/bin/env bash
# Real output for docs/examples/exporter.md: an exporter watching a namespace in which one
# destination runs out of ports (150 of 200 in TIME_WAIT) and one listener has a full accept
# queue, scraped directly and through a Prometheus server. Needs root, prometheus, python3.
# Usage: bench/exporter/example.sh [path/to/tcpdoctor]  (default: target/release/tcpdoctor)
set -euo pipefail
. "$(dirname "$0")/../need.sh"
need prometheus
cd "$(dirname "$0")/../.."
bin=${1:-target/release/tcpdoctor}
ns=tdoc-exex-$$
dir=$(mktemp -d /tmp/tdoc-exex.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
ip netns add "$ns"
ip netns exec "$ns" sh -c 'ip link set lo up
  sysctl -qw net.ipv4.ip_local_port_range="40000 40199" net.ipv4.tcp_tw_reuse=0'
# A listener with backlog 1 that never accepts, and three clients: its queue is full.
ip netns exec "$ns" python3 -c '
import socket, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 8080)); l.listen(1)
cs = []
for _ in range(3):
    c = socket.socket(); c.setblocking(False); c.connect_ex(("127.0.0.1", 8080)); cs.append(c)
time.sleep(300)' &
pids+=($!)
ip netns exec "$ns" python3 bench/sockets/make_time_wait.py 150 1
"$bin" exporter --netns "$ns" --listen 127.0.0.1:19977 --interval 5s --top-destinations 3 2>"$dir/stderr" &
pids+=($!)
cat >"$dir/prometheus.yml" <<YML
global: {scrape_interval: 5s, scrape_timeout: 5s}
scrape_configs: [{job_name: tcpdoctor, static_configs: [{targets: ['127.0.0.1:19977']}]}]
YML
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
  --web.listen-address=127.0.0.1:19990 --log.level=error 2>/dev/null &
pids+=($!)
sleep 12   # two diagnosis windows, two scrapes
echo "### stderr"
cat "$dir/stderr"
echo "### /metrics (selected)"
curl -s 127.0.0.1:19977/metrics | grep -E '^(# (HELP|TYPE) )?tcpdoctor_(sockets|destination_(time_wait_sockets|port_headroom|port_budget_used_ratio)|listener_(accept_queue|backlog)|syn_give_up_seconds|rto_floor_seconds|census_age_seconds|tcpext_listen_overflows_total|tcp_active_opens_total)[{ ]' \
  | grep -vE 'state="(SYN_RECV|FIN_WAIT1|FIN_WAIT2|CLOSE|CLOSE_WAIT|LAST_ACK|CLOSING)"'
echo "### active findings"
curl -s 127.0.0.1:19977/metrics | grep -E '^tcpdoctor_findings\{.*\} [1-9]'
echo "### same, via the Prometheus API"
curl -s '127.0.0.1:19990/api/v1/query' --data-urlencode 'query=tcpdoctor_findings{source="observed"} > 0' | python3 -m json.tool | grep -E '"(pathology|severity|source|instance)"|"[0-9]+"$' || true
echo "### sizes"
echo "series: $(curl -s 127.0.0.1:19977/metrics | grep -vc '^#')"
