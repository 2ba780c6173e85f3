#!/bin/bash
# A/B of tcp_stream with and without --zerocopy against one `thrum server`
# on loopback, alternating, ROUNDS rounds of SECONDS s each (docs/performance.md).
# Prints Gbit/s, client+server CPU seconds over the window, and CPU s per GB.
# Usage: bench/zerocopy_ab.sh [THRUM] [ROUNDS] [SECONDS] [PORT]
set -euo pipefail
B=${1:-target/release/thrum}
ROUNDS=${2:-5}
SECONDS_EACH=${3:-3}
PORT=${4:-12965}
"$B" server --listen 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null; wait $SP 2>/dev/null' EXIT
sleep 0.5
for _ in $(seq "$ROUNDS"); do
  for z in plain zerocopy; do
    extra=()
    [ "$z" = zerocopy ] && extra=(--zerocopy)
    timeout 30 "$B" run tcp_stream -H "127.0.0.1:$PORT" -l "${SECONDS_EACH}s" --warmup 500ms \
      "${extra[@]}" --json 2>/dev/null | Z=$z python3 -c '
import json, os, sys
s = json.load(sys.stdin)["summary"]
def cpu(side):
    w = side.get("rusage_window") or {}
    return w.get("user_s", 0) + w.get("system_s", 0)
gb = s["remote"]["bytes_received"] / 1e9
c = cpu(s["local"]) + cpu(s["remote"])
gbps = s["throughput_bps"] / 1e9
print(os.environ["Z"], f"{gbps:.2f} Gbit/s", f"cpu_s {c:.2f}", f"cpu_s/GB {c / gb:.3f}", s["local"].get("zerocopy"))
'
  done
done
