#!/usr/bin/env bash
# Many flows: tcp_rr and udp_rr with F flows on 2 threads against one
# separate `thrum server --max-flows 100000` on loopback. Per run: whether it
# ran, set-up time (first data socket to the server's `started`), both ends'
# peak RSS, transactions/s, and the flows that completed no transaction.
# Then a least-squares line through RSS against flows per end, and what it
# gives at 100,000 flows.
#
# 100,000 flows need 100,000+ descriptors per process. Both ends raise
# RLIMIT_NOFILE as far as they may (the hard limit too with
# CAP_SYS_RESOURCE); where that is below what a row needs, the row runs
# and reports the failure it meets, and the fit says what the memory would be.
#
# usage: bench/flows.sh [-r RUNS] [-l SECONDS] [FLOWS...]
#   default: -r 3 -l 5 10000 19500 100000
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=3
LEN=5
while getopts "r:l:" o; do
	case $o in
	r) RUNS=$OPTARG ;;
	l) LEN=$OPTARG ;;
	*) sed -n 2,16p "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
FLOWS=("$@")
[ ${#FLOWS[@]} -gt 0 ] || FLOWS=(10000 19500 100000)

cargo build --release -q
THRUM=target/release/thrum
OUT=$(mktemp -d)
trap '[ -z "$SRV" ] || kill $SRV 2>/dev/null; rm -rf "$OUT"' EXIT
PORT=$((20000 + RANDOM % 20000))
SRV=
# A fresh server per run: its peak RSS is the process's, over every session.
server() {
	[ -z "$SRV" ] || { kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null || true; }
	"$THRUM" server --port "$PORT" --listen 127.0.0.1 --max-flows 100000 -q &
	SRV=$!
	sleep 0.5
}

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# RLIMIT_NOFILE soft/hard: $(ulimit -Sn)/$(ulimit -Hn); net.ipv4.ip_local_port_range: $(cat /proc/sys/net/ipv4/ip_local_port_range | tr '\t' ' ')"
for test in tcp_rr udp_rr; do
	extra=()
	# Tens of thousands of first requests go out at once: give the answers
	# time rather than count them lost after udp_rr's default 50 ms.
	[ "$test" = udp_rr ] && extra=(--rr-timeout 2s)
	for f in "${FLOWS[@]}"; do
		for r in $(seq "$RUNS"); do
			server
			"$THRUM" run "$test" -H "127.0.0.1:$PORT" -F "$f" -T 2 -l "${LEN}s" --warmup 1s \
				"${extra[@]}" --json >"$OUT/$test-$f-$r.json" 2>"$OUT/$test-$f-$r.err" || true
		done
	done
done
python3 - "$OUT" "$RUNS" "${FLOWS[@]}" <<'EOF'
import json, sys, statistics as st
out, runs, flows = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3:]]
print("| test | flows | ran | set-up s (median) | client RSS MB | server RSS MB | tx/s (median) | flows with no transaction | failure |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
fits = {}
for test in ("tcp_rr", "udp_rr"):
    for f in flows:
        ok, setup, rss_c, rss_s, tps, idle, fail = 0, [], [], [], [], [], ""
        for r in range(1, runs + 1):
            try:
                d = json.load(open(f"{out}/{test}-{f}-{r}.json"))
            except Exception as e:
                fail = open(f"{out}/{test}-{f}-{r}.err").read().strip().splitlines()[-1:] or [str(e)]
                fail = fail[0]
                continue
            s = d["summary"]
            if s.get("error"):
                fail = s["error"]
                continue
            ok += 1
            setup.append(s["setup_s"])
            rss_c.append(s["local"]["rusage"]["max_rss_kb"] / 1e3)
            rss_s.append(s["remote"]["rusage"]["max_rss_kb"] / 1e3)
            tps.append(s["transactions_per_s"])
            per = [0] * f
            for iv in d["intervals"]:
                for i, c in enumerate(iv["local"]):
                    per[i] += c["transactions"]
            idle.append(sum(1 for x in per if x == 0))
            for end, v in (("client", rss_c[-1]), ("server", rss_s[-1])):
                fits.setdefault((test, end), []).append((f, v))
        med = lambda v, fmt: (fmt % st.median(v)) if v else "—"
        print(f"| {test} | {f:,} | {ok}/{runs} | {med(setup, '%.2f')} | {med(rss_c, '%.1f')} | {med(rss_s, '%.1f')} | {med(tps, '%.0f')} | {max(idle) if idle else '—'} | {fail.replace('|', '/')[:160]} |")
print()
print("RSS against flows, least squares over every run that ran:")
for (test, end), pts in sorted(fits.items()):
    xs = sorted({x for x, _ in pts})
    if len(xs) < 2:
        continue
    mx, my = st.mean(x for x, _ in pts), st.mean(y for _, y in pts)
    b = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    a = my - b * mx
    print(f"- {test} {end}: {a:.1f} MB + {b * 1e3:.2f} KB per flow; at 100,000 flows {a + b * 1e5:.0f} MB")
EOF
