#!/usr/bin/env bash
# Open-loop latency at a chosen rate, thrum against sockperf's under-load
# mode, side by side on loopback (issue 16). For each rate (default 10k, 50k
# and 100k messages/s), one UDP flow of 14-byte messages:
#
#   thrum      udp_rr -r 14,14 --rate R: every message is a transaction,
#              answered and timed from its intended start (summary.latency_ns)
#              and from its actual send (service_latency_ns).
#   sockperf   `sockperf ul --mps R -m 14 --full-rtt`: the server answers one
#              message in --reply-every (100 by default) and only those are
#              timed; the RTT is from the actual send.
#   sockperf/1 the same with --reply-every 1, every message answered and
#              timed: the like-for-like work of thrum's row.
#
# Printed per row: achieved rate, RTT p50 and p99 as the tool reports it
# (thrum's from the intended start; sockperf's from the actual send, and it
# busy-waits for each send time, so it is never late), thrum's service time
# p50/p99 (from the actual send: the figure comparable with sockperf's) and
# generator lag p99, how many samples that is, and CPU per message: user+sys of client and
# server together (wait4 rusage of each process, via compare_helper.py run)
# divided by the messages sent. Client and server share the machine; run it
# on an otherwise idle one. Traffic goes to 127.0.0.1 only; every process
# has a deadline.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
thrum=target/release/thrum
duration=5
rates="10000 50000 100000"
port=12911
pin=""

usage() {
	cat <<'EOF'
usage: bench/under-load.sh [options]
  --thrum PATH   thrum binary (default target/release/thrum)
  --duration S   seconds per run (default 5)
  --rates LIST   space-separated messages/s (default "10000 50000 100000")
  --pin          client and server both on CPU 0 (taskset)
  --quick        smoke check: --duration 1 --rates 10000
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--thrum) thrum=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--rates) rates=$2; shift 2 ;;
	--pin) pin="taskset -c 0"; shift ;;
	--quick) duration=1; rates=10000; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

[ -x "$thrum" ] || { echo "no thrum binary at $thrum (cargo build --release)" >&2; exit 1; }
have_sockperf=1
command -v sockperf >/dev/null || have_sockperf=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
helper=("python3" "$here/compare_helper.py" run)

# cpu_s FILE: user + sys seconds from a `compare_helper.py run` rusage file.
cpu_s() { awk '{ printf "%.4f", $1 + $2 }' "$1"; }

# run_thrum RATE: prints "achieved p50_ns p99_ns samples cpu_s messages
# service_p50_ns service_p99_ns lag_p99_ns"
run_thrum() {
	local rate=$1
	"${helper[@]}" "$work/srv.ru" $((duration + 15)) -- $pin "$thrum" server --listen 127.0.0.1 -p "$port" --once >/dev/null 2>&1 &
	local srv=$!
	sleep 0.3
	"${helper[@]}" "$work/cli.ru" $((duration + 15)) -- $pin "$thrum" run udp_rr -H "127.0.0.1:$port" \
		-r 14,14 --rate "$rate" -l "${duration}s" --warmup 0s --json >"$work/thrum.json" 2>/dev/null || true
	wait "$srv" || true
	python3 - "$work/thrum.json" "$(cpu_s "$work/cli.ru")" "$(cpu_s "$work/srv.ru")" <<'EOF'
import json, sys
try:
    s = json.load(open(sys.argv[1]))["summary"]
except Exception:
    print("0 0 0 0 0 0 0 0 0"); sys.exit()
l = s.get("latency_ns") or {}
v = s.get("service_latency_ns") or {}
g = s.get("generator_lag_ns") or {}
n = s.get("transactions") or round((s.get("achieved_per_s") or 0) * (s.get("duration_s") or 0))
print(round(s.get("achieved_per_s") or 0), l.get("p50", 0), l.get("p99", 0), n,
      float(sys.argv[2]) + float(sys.argv[3]), n, v.get("p50", 0), v.get("p99", 0), g.get("p99", 0))
EOF
}

# run_sockperf RATE REPLY_EVERY: the same fields
run_sockperf() {
	local rate=$1 every=$2
	"${helper[@]}" "$work/srv.ru" $((duration + 5)) -- $pin sockperf sr -i 127.0.0.1 -p "$port" >/dev/null 2>&1 &
	local srv=$!
	sleep 0.3
	"${helper[@]}" "$work/cli.ru" $((duration + 15)) -- $pin sockperf ul -i 127.0.0.1 -p "$port" \
		--mps "$rate" -m 14 -t "$duration" --full-rtt --reply-every "$every" >"$work/sp.txt" 2>&1 || true
	wait "$srv" || true
	python3 - "$work/sp.txt" "$(cpu_s "$work/cli.ru")" "$(cpu_s "$work/srv.ru")" <<'EOF'
import re, sys
t = open(sys.argv[1], errors="replace").read()
v = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)", t)
tot = re.search(r"\[Total Run\] RunTime=[\d.]+ sec; Warm up time=\d+ msec; SentMessages=(\d+)", t)
p = lambda q: re.search(r"percentile %s =\s+([\d.]+)" % q, t)
if not (v and tot and p("50.000") and p("99.000")):
    print("0 0 0 0 0 0 - - -"); sys.exit()
secs, sent, got = float(v.group(1)), int(v.group(2)), int(v.group(3))
print(round(sent / secs), round(float(p("50.000").group(1)) * 1000),
      round(float(p("99.000").group(1)) * 1000), got,
      float(sys.argv[2]) + float(sys.argv[3]), int(tot.group(1)), "-", "-", "-")
EOF
}

us() {
	if [ "$1" = - ]; then echo -; else awk -v n="$1" 'BEGIN { printf "%.1f us", n / 1000 }'; fi
}

echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M UTC')${pin:+, pinned to CPU 0}"
echo
echo "| offered (/s) | tool | achieved (/s) | RTT p50 | RTT p99 | service p50 | service p99 | generator lag p99 | samples | CPU per message |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for rate in $rates; do
	tools="thrum"
	[ "$have_sockperf" = 1 ] && tools="thrum sockperf sockperf/1"
	for tool in $tools; do
		case $tool in
		thrum) line=$(run_thrum "$rate") ;;
		sockperf) line=$(run_sockperf "$rate" 100) ;;
		sockperf/1) line=$(run_sockperf "$rate" 1) ;;
		esac
		read -r achieved p50 p99 samples cpu msgs sp50 sp99 lag <<<"$line"
		per=$(awk -v c="$cpu" -v m="$msgs" 'BEGIN { if (m > 0) printf "%.2f us", c / m * 1e6; else print "-" }')
		echo "| $rate | $tool | $achieved | $(us "$p50") | $(us "$p99") | $(us "$sp50") | $(us "$sp99") | $(us "$lag") | $samples | $per |"
		port=$((port + 1))
	done
done
[ "$have_sockperf" = 1 ] || echo "(sockperf is not on PATH: apt-get install sockperf)"
