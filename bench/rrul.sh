#!/usr/bin/env bash
# Latency under load, benchmarked (issue 17): `thrum run rrul_be` on
# loopback and, as root, on the shaped three-namespace path of
# tests/e2e/rrul_netns.rs (client — router — server, each router egress
# htb 50 Mbit/s over a byte FIFO, the bulk flows on cubic). For each row it
# prints thrum's CPU per Gbit of bulk (both ends' process CPU over the
# measurement window, from the result's rusage_window, over the bulk parts'
# bits in that window) and the probe latency under load it reports (loaded
# minus idle, p50 and p99). Beside it, flent's rrul over netperf when
# `flent` and `netperf`/`netserver` are on PATH; else a line naming what is
# missing and where it comes from: flent is on PyPI (and in Debian main),
# netperf only in Debian's non-free section and in netperf's own source.
#
# Nothing is installed or built here but thrum (debug or release, as given).
# Traffic goes to 127.0.0.1 or into namespaces this script creates, named
# with its PID and deleted by an EXIT trap with every process it started.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bench/rrul.sh [options]
  --duration S    seconds of the loaded phase (default 30)
  --idle S        seconds of the idle and the recovery phase (default 5)
  --quick         smoke check: --duration 2 --idle 1
  --thrum PATH    thrum binary (default target/release/thrum, built with
                  `cargo build --release` first)
  --buffers LIST  the shaped path's bfifo limits in bytes, comma-separated
                  (default 1250000,16000: 200 ms and 2.6 ms at 50 Mbit/s)
  --no-netns      loopback only, even as root
Prints one table; exits 1 if a run failed.
EOF
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DURATION=30
IDLE=5
THRUM=""
BUFFERS="1250000,16000"
NETNS=1
while (($#)); do
	case "$1" in
	--duration | --idle | --thrum | --buffers)
		(($# >= 2)) || { echo "rrul.sh: $1 needs a value" >&2; exit 2; } ;;
	esac
	case "$1" in
	--duration) DURATION="$2"; shift 2 ;;
	--idle) IDLE="$2"; shift 2 ;;
	--quick) DURATION=2; IDLE=1; shift ;;
	--thrum) THRUM="$2"; shift 2 ;;
	--buffers) BUFFERS="$2"; shift 2 ;;
	--no-netns) NETNS=0; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "rrul.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
done
THRUM="${THRUM:-$ROOT/target/release/thrum}"
[[ -x "$THRUM" ]] || { echo "rrul.sh: no thrum at $THRUM (cargo build --release, or --thrum PATH)" >&2; exit 2; }

SCRATCH="$(mktemp -d)"
PIDS=()
# shellcheck source=bench/lib/netns.sh
source "$ROOT/bench/lib/netns.sh"
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	path3_cleanup
	rm -rf "$SCRATCH"
}
trap cleanup EXIT

# Everything a run may take: the phases, set-up and drain, with room.
LIMIT=$((DURATION + 2 * IDLE + 60))
FAILED=0

# A free TCP port on loopback for a server.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Wait until something listens on HOST:PORT (inside namespace NS, if given).
wait_listen() {
	local ns="$1" host="$2" port="$3" i
	for i in $(seq 100); do
		if ${ns:+ip netns exec "$ns"} python3 -c 'import socket,sys; socket.create_connection((sys.argv[1],int(sys.argv[2])),1)' "$host" "$port" 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	echo "rrul.sh: nothing listens on $host:$port" >&2
	return 1
}

# The row of one result: CPU-seconds per Gbit of bulk (both ends' process
# CPU over the window, over the bulk parts' bits in it), the bulk goodput
# each way in the loaded phase, and the probe latency: idle p50, latency
# under load p50 and p99 (loaded minus idle).
summarise() {
	python3 - "$1" "$2" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
doc = json.load(open(path))
s = doc["summary"]
if s.get("error"):
    print(f"| {label} | failed: {s['error']} | | | | |")
    sys.exit(1)
def cpu(side):
    r = side.get("rusage_window") or side.get("rusage") or {}
    return r.get("user_s", 0.0) + r.get("system_s", 0.0)
cpu_s = cpu(s["local"]) + cpu(s["remote"])
bits = sum(p["throughput_bps"] * s["duration_s"] for p in s["parts"]
           if p["direction"] in ("up", "down", "both") and p.get("throughput_bps"))
per_gbit = f"{cpu_s / (bits / 1e9):.2f}" if bits > 0 else "-"
ph = s.get("phases") or {}
loaded = ph.get("loaded", {})
ms = lambda ns: f"{ns / 1e6:.2f}"
# Loaded minus idle, with its sign: on a busy host it can be negative.
signed = lambda ns: f"{ns / 1e6:+.2f}"
idle = ((ph.get("idle") or {}).get("probe_latency_ns") or {}).get("p50")
lul = s.get("latency_under_load_ns") or {}
print(f"| {label} | {per_gbit} | {loaded.get('throughput_up_bps', 0) / 1e6:.1f} / "
      f"{loaded.get('throughput_down_bps', 0) / 1e6:.1f} | "
      f"{ms(idle) if idle is not None else '-'} | "
      f"{signed(lul['p50']) if 'p50' in lul else '-'} | "
      f"{signed(lul['p99']) if 'p99' in lul else '-'} |")
PY
}

# thrum run rrul_be against HOST:PORT, inside namespace NS if given.
thrum_rrul() {
	local label="$1" ns="$2" addr="$3" out="$SCRATCH/$4.json"
	if ! timeout "$LIMIT" ${ns:+ip netns exec "$ns"} "$THRUM" run rrul_be -H "$addr" \
		--cc cubic --warmup 0 --idle "${IDLE}s" -l "${DURATION}s" --recovery "${IDLE}s" \
		--cpu --json >"$out" 2>"$SCRATCH/$4.err"; then
		if [[ ! -s "$out" ]]; then
			echo "| $label | failed: $(tail -n1 "$SCRATCH/$4.err") | | | | |"
			FAILED=1
			return
		fi
	fi
	summarise "$label" "$out" || FAILED=1
}

# flent's rrul over netperf toward HOST (a netserver there), inside NS.
flent_rrul() {
	local label="$1" ns="$2" host="$3"
	# What is missing, and where it comes from.
	local why=""
	if ! command -v flent >/dev/null; then
		why="flent is not on PATH (pip install flent, or Debian's flent package)"
	fi
	if ! command -v netperf >/dev/null || ! command -v netserver >/dev/null; then
		why="${why:+$why; }netperf/netserver are not on PATH (not on PyPI; Debian has netperf only in non-free; or build it from its own source)"
	fi
	if [[ -n "$why" ]]; then
		echo "| $label: flent rrul | not run: $why | | | | |"
		return
	fi
	local dir="$SCRATCH/flent-$label"
	mkdir -p "$dir"
	if timeout "$LIMIT" ${ns:+ip netns exec "$ns"} flent rrul -H "$host" -l "$DURATION" \
		-D "$dir" -f summary >"$dir/summary.txt" 2>"$dir/err"; then
		echo "| $label: flent rrul | see below | | | | |"
		sed 's/^/    /' "$dir/summary.txt" >>"$SCRATCH/flent.txt"
	else
		echo "| $label: flent rrul | failed: $(tail -n1 "$dir/err") | | | | |"
	fi
}

echo "thrum rrul_be: ${IDLE} s idle, ${DURATION} s loaded, ${IDLE} s recovery; $($THRUM --version | head -n1)"
echo
echo "| path | thrum CPU-s per Gbit of bulk | loaded up / down Mbit/s | idle probe p50 ms | latency under load p50 ms | p99 ms |"
echo "|---|---|---|---|---|---|"

# Loopback.
port="$(free_port)"
"$THRUM" server --listen 127.0.0.1 -p "$port" >"$SCRATCH/server.log" 2>&1 &
PIDS+=($!)
wait_listen "" 127.0.0.1 "$port"
thrum_rrul loopback "" "127.0.0.1:$port" loopback
if command -v netserver >/dev/null; then
	netserver -D -L 127.0.0.1 >/dev/null 2>&1 &
	PIDS+=($!)
fi
flent_rrul loopback "" 127.0.0.1

# The shaped path, as root.
if ((NETNS)) && [[ $EUID -eq 0 ]] && command -v ip >/dev/null && command -v tc >/dev/null; then
	IFS=, read -r -a limits <<<"$BUFFERS"
	for i in "${!limits[@]}"; do
		limit="${limits[$i]}"
		path3_build 218 $((2 * i))
		a="$P3_A" b="$P3_B" far="$P3_FAR"
		for dev in ra rb; do
			path3_htb_bfifo "$dev" 50mbit "$limit"
		done
		ip netns exec "$b" "$THRUM" server --listen "$far.1" -p 12880 >"$SCRATCH/server-$i.log" 2>&1 &
		PIDS+=($!)
		wait_listen "$a" "$far.1" 12880
		label="shaped 50 Mbit/s, bfifo $limit B"
		thrum_rrul "$label" "$a" "$far.1:12880" "shaped-$i"
		if command -v netserver >/dev/null; then
			ip netns exec "$b" netserver -D -L "$far.1" >/dev/null 2>&1 &
			PIDS+=($!)
		fi
		flent_rrul "$label" "$a" "$far.1"
	done
elif ((NETNS)); then
	echo
	echo "(the shaped three-namespace rows need root, ip and tc: skipped)"
fi
if [[ -s "$SCRATCH/flent.txt" ]]; then
	echo
	echo "flent's summaries:"
	cat "$SCRATCH/flent.txt"
fi
exit "$FAILED"
