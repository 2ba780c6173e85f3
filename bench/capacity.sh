#!/usr/bin/env bash
# Path capacity by packet trains (issue 18): builds the three-namespace
# path A (client) — R (router) — B (server), shapes R's egress toward B
# with htb (a small bucket, shared/TESTING.md) to each rate in turn, runs
# `thrum run capacity` from A and prints a Markdown table for
# BENCHMARKS.md: the shaped rate, the estimate, estimate over shaped rate,
# the seconds the run took to give its estimate (setup, warm-up and window
# included: what a user waits), and the probe's average load as a fraction
# of the estimate.
#
# Needs root and iproute2 (ip, tc). The path is bench/lib/netns.sh's, the
# e2e tests' own; namespace names carry this script's PID; an EXIT trap
# stops the server and deletes the namespaces (and the veths with them).
# Traffic stays inside them.
set -euo pipefail

usage() {
	cat <<'USAGE'
usage: bench/capacity.sh [options]   (as root)
  --thrum PATH    thrum binary (default target/release/thrum, built with
                  `cargo build --release` first)
  --rates LIST    shaped rates in Mbit/s, comma-separated (default 10,50,200)
  --duration D    measurement window per run (default 4s)
  --warmup D      warm-up per run (default 1s)
  --reverse       shape R's egress toward A instead and measure with
                  --reverse (the server sends the trains)
  --mtu N         MTU of every veth on the path, 1280 to 65535 (default
                  1500); thrum's packets fill it (9000: 1 Gbit/s, below)
  --probe-rate R  the probe's average load, thrum's --rate (default 1M;
                  with --mtu 9000 give 10M, or a cycle of trains takes 9 s)
  --quick         smoke check: --rates 50 --duration 2s
USAGE
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
THRUM="$ROOT/target/release/thrum"
RATES="10,50,200"
DURATION=4s
WARMUP=1s
REVERSE=0
MTU=1500
PROBE=()
while (($#)); do
	case "$1" in
	--thrum | --rates | --duration | --warmup | --mtu | --probe-rate)
		(($# >= 2)) || { echo "capacity.sh: $1 needs a value" >&2; exit 2; } ;;
	esac
	case "$1" in
	--thrum) THRUM="$2"; shift 2 ;;
	--rates) RATES="$2"; shift 2 ;;
	--duration) DURATION="$2"; shift 2 ;;
	--warmup) WARMUP="$2"; shift 2 ;;
	--reverse) REVERSE=1; shift ;;
	--mtu) MTU="$2"; shift 2 ;;
	--probe-rate) PROBE=(--rate "$2"); shift 2 ;;
	--quick) RATES=50; DURATION=2s; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "capacity.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
done
for r in ${RATES//,/ }; do
	[[ "$r" =~ ^[1-9][0-9]*$ ]] || { echo "capacity.sh: --rates takes whole Mbit/s (got $r)" >&2; exit 2; }
done
if ! [[ "$MTU" =~ ^[1-9][0-9]*$ ]] || ((MTU < 1280 || MTU > 65535)); then
	echo "capacity.sh: --mtu takes a whole number of bytes from 1280 to 65535 (got $MTU)" >&2
	exit 2
fi
[[ $(id -u) -eq 0 ]] || { echo "capacity.sh: needs root (network namespaces, tc)" >&2; exit 2; }
for t in ip tc python3; do
	command -v "$t" >/dev/null || { echo "capacity.sh: $t is required" >&2; exit 2; }
done
[[ -x "$THRUM" ]] || { echo "capacity.sh: no thrum binary at $THRUM (cargo build --release)" >&2; exit 2; }
THRUM="$(realpath "$THRUM")"

# shellcheck source=bench/lib/netns.sh
source "$ROOT/bench/lib/netns.sh"
SERVER=""
cleanup() {
	[[ -n "$SERVER" ]] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
	path3_cleanup
}
trap cleanup EXIT

# The path: A 10.215.1.1 — R 10.215.1.254 | 10.215.2.254 — B 10.215.2.1.
path3_build 215 1
path3_mtu "$MTU"
A="$P3_A" R="$P3_R" B="$P3_B"

PORT=12899
ip netns exec "$B" "$THRUM" server --listen 10.215.2.1 -p "$PORT" >/dev/null 2>&1 &
SERVER=$!
for _ in $(seq 50); do
	ip netns exec "$B" ss -ltn "sport = :$PORT" | grep -q LISTEN && break
	sleep 0.1
done

# The client-to-server direction's narrow link is R's egress toward B (rb);
# server to client, toward A (ra).
DEV=rb
EXTRA=()
WAY="client to server"
if ((REVERSE)); then
	DEV=ra
	EXTRA=(--reverse)
	WAY="server to client (--reverse)"
fi

# One table row from a run's JSON on stdin: shaped Mbit/s, start, end.
ROW=$(
	cat <<'PY'
import json, sys
shaped = float(sys.argv[1]) * 1e6
secs = float(sys.argv[3]) - float(sys.argv[2])
s = json.load(sys.stdin)["summary"]
c = s.get("capacity_bps")
if c is None:
    print(f"| {shaped/1e6:.0f} Mbit/s | no estimate | | {secs:.1f} | |")
else:
    lo, hi = s["capacity_interval_bps"]
    shaper = s.get("shaper")
    note = f", bucket {shaper['burst_packets']} packets" if shaper else ""
    if any(d["code"] == "capacity_sender_limited" for d in s["diagnostics"]):
        note += ", not slowed by the path (capacity_sender_limited)"
    print(f"| {shaped/1e6:.0f} Mbit/s | {c/1e6:.2f} Mbit/s ({lo/1e6:.2f}–{hi/1e6:.2f}){note} "
          f"| {c/shaped:.3f} | {secs:.1f} | {s['probe_load_fraction']:.4f} |")
PY
)

echo "capacity by packet trains, $WAY: htb on R's egress ($DEV), MTU $MTU, -l $DURATION --warmup $WARMUP${PROBE[*]:+ ${PROBE[*]}}, $(basename "$THRUM") $("$THRUM" --version 2>/dev/null | head -1 | awk '{print $2}'), $(date -u +%Y-%m-%d)"
echo
echo "| shaped rate | estimate | estimate / shaped | seconds to estimate | probe load fraction |"
echo "|---|---|---|---|---|"
failed=0
for r in ${RATES//,/ }; do
	path3_htb "$DEV" "${r}mbit"
	t0=$(date +%s.%N)
	if ! json=$(timeout 120 ip netns exec "$A" "$THRUM" run capacity -H "10.215.2.1:$PORT" \
		-l "$DURATION" --warmup "$WARMUP" "${EXTRA[@]}" "${PROBE[@]}" --json); then
		echo "| ${r} Mbit/s | run failed | | | |"
		failed=1
		continue
	fi
	t1=$(date +%s.%N)
	python3 -c "$ROW" "$r" "$t0" "$t1" <<<"$json"
done
exit "$failed"
