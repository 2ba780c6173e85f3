#!/bin/bash
# Where the CPU goes, kernel included: a system-wide `perf record -e cpu-clock`
# (a software event, so it works in VMs without hardware counters) around one
# `thrum run` against a separate `thrum server` on loopback, then each sample
# put in one bucket by its call stack (bench/kprofile_split.py): the send
# path, the softirq receive path, the receive call, the syscall and driver
# machinery (what --driver can change), the scheduler, user space, idle.
# docs/performance.md has the io_uring-vs-epoll split made with it.
# Usage: bench/kprofile.sh [THRUM] -- RUN-ARGS...   (e.g. -- udp_rr -F 16 -T 2 -b 16 -l 4s)
# Needs perf (Debian: linux-perf) and kernel.perf_event_paranoid <= 0 or root;
# symbols need kernel.kptr_restrict 0. Writes nothing outside a temp dir.
set -euo pipefail
B=target/release/thrum
if [ "${1:-}" != "--" ]; then B=$1; shift; fi
[ "${1:-}" = "--" ] || { echo "usage: bench/kprofile.sh [THRUM] -- RUN-ARGS..." >&2; exit 2; }
shift
PORT=${PORT:-12966}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
"$B" server --listen 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null; wait $SP 2>/dev/null; rm -rf "$TMP"' EXIT
sleep 0.5
test_name=$1
shift
perf record -q -e cpu-clock -F 4000 -a -g -o "$TMP/perf.data" -- \
  "$B" run "$test_name" -H "127.0.0.1:$PORT" --warmup 0s "$@" --keyval >"$TMP/run.txt" 2>&1
grep -E '^(THROUGHPUT|TRANSACTIONS)=' "$TMP/run.txt" || cat "$TMP/run.txt"
perf script -i "$TMP/perf.data" 2>/dev/null | python3 "$HERE/kprofile_split.py" 8
