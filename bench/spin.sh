#!/usr/bin/env bash
# The spin mode against the tools people compare it with, on loopback,
# tools alternated round by round:
#   tcp_rr 1 byte:  thrum --spin, thrum (blocking driver), netperf TCP_RR
#                   (transactions/s);
#   udp_rr 64 byte: thrum --spin -r 64,64, sockperf ping-pong -m 64
#                   --full-rtt (round-trip p50, µs);
#   with --napi:    thrum tcp_rr --driver uring, and the same with
#                   --busy-poll 50 --prefer-busy-poll (each ring registers
#                   io_uring NAPI busy polling; transactions/s), against
#                   the loopback server or, with --napi-host, a `thrum
#                   server` across a NIC (loopback has no NAPI: there the
#                   two rows differ by noise only). Busy polling above
#                   net.core.busy_read needs CAP_NET_ADMIN on both ends.
# Prints each run's figure, then the medians and ratios, with the load
# average beside them (a spinning pair needs two idle CPUs; on a busy
# host the scheduler shares them out and the spin loses its point).
#
# usage: bench/spin.sh [--rounds N] [--duration S] [--thrum PATH]
#                      [--netperf PATH] [--netserver PATH]
#                      [--napi [--napi-host HOST:PORT]]
# netperf and netserver come from PATH unless named; sockperf too
# (Debian: apt-get install sockperf). Every process runs under a deadline
# and an EXIT trap stops the servers this script started.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS=3
DURATION=4
THRUM="$ROOT/target/release/thrum"
NETPERF=netperf
NETSERVER=netserver
NAPI=0
NAPI_HOST=
while (($#)); do
	case "$1" in
	--rounds) ROUNDS="$2"; shift 2 ;;
	--duration) DURATION="$2"; shift 2 ;;
	--thrum) THRUM="$2"; shift 2 ;;
	--netperf) NETPERF="$2"; shift 2 ;;
	--netserver) NETSERVER="$2"; shift 2 ;;
	--napi) NAPI=1; shift ;;
	--napi-host) NAPI=1; NAPI_HOST="$2"; shift 2 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
for t in "$THRUM" "$NETPERF" "$NETSERVER" sockperf; do
	command -v "$t" >/dev/null || { echo "missing: $t" >&2; exit 2; }
done

P_THRUM=17601 P_NETPERF=17602 P_SOCKPERF=17603
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
"$THRUM" server --port "$P_THRUM" >/dev/null 2>&1 & pids+=($!)
"$NETSERVER" -D -p "$P_NETPERF" >/dev/null 2>&1 & pids+=($!)
sockperf server -i 127.0.0.1 -p "$P_SOCKPERF" >/dev/null 2>&1 & pids+=($!)
sleep 1

limit=$((DURATION + 20))
thrum_json() { timeout "$limit" "$THRUM" run "$@" -H "127.0.0.1:$P_THRUM" -l "${DURATION}s" --no-save --json; }
napi_json() {
	timeout "$limit" "$THRUM" run tcp_rr --driver uring "$@" -H "${NAPI_HOST:-127.0.0.1:$P_THRUM}" \
		-l "${DURATION}s" --no-save --json
}
tps() { python3 -c 'import json,sys; print(round(json.load(sys.stdin)["summary"]["transactions_per_s"]))'; }
p50() { python3 -c 'import json,sys; print(round(json.load(sys.stdin)["summary"]["latency_ns"]["p50"]/1000, 2))'; }

declare -A runs
for ((r = 1; r <= ROUNDS; r++)); do
	runs[spin]+="$(thrum_json tcp_rr --spin | tps) "
	runs[thrum]+="$(thrum_json tcp_rr | tps) "
	runs[netperf]+="$(timeout "$limit" "$NETPERF" -H 127.0.0.1 -p "$P_NETPERF" -l "$DURATION" -t TCP_RR -P 0 -- -r 1,1 -o THROUGHPUT | tail -1 | cut -d. -f1) "
	runs[spin_udp]+="$(thrum_json udp_rr --spin -r 64,64 | p50) "
	runs[sockperf]+="$(timeout "$limit" sockperf ping-pong -i 127.0.0.1 -p "$P_SOCKPERF" -t "$DURATION" -m 64 --full-rtt 2>&1 |
		sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p') "
	if ((NAPI)); then
		runs[uring]+="$(napi_json | tps) "
		runs[uring_napi]+="$(napi_json --busy-poll 50 --prefer-busy-poll | tps) "
	fi
	echo "round $r: load $(cut -d' ' -f1-3 /proc/loadavg)"
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A m
keys=(spin thrum netperf spin_udp sockperf)
((NAPI)) && keys+=(uring uring_napi)
for k in "${keys[@]}"; do
	m[$k]=$(echo "${runs[$k]}" | median)
	echo "$k: ${runs[$k]}-> median ${m[$k]}"
done
echo "tcp_rr --spin / netperf TCP_RR: $(python3 -c "print(round(${m[spin]}/${m[netperf]}, 3))")"
echo "tcp_rr --spin / tcp_rr: $(python3 -c "print(round(${m[spin]}/${m[thrum]}, 3))")"
echo "udp_rr --spin p50 / sockperf p50: $(python3 -c "print(round(${m[spin_udp]}/${m[sockperf]}, 3))")"
if ((NAPI)); then
	echo "tcp_rr --driver uring --busy-poll 50 / --driver uring (${NAPI_HOST:-loopback}): $(python3 -c "print(round(${m[uring_napi]}/${m[uring]}, 3))")"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
