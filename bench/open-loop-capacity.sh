#!/usr/bin/env bash
# Generator capacity of open-loop thrum (issue 16): for udp_rr and tcp_rr
# with 1 and 16 flows, the highest offered rate (--rate) that thrum holds on
# loopback, "held" meaning achieved within 1 % of offered AND the
# generator's lag p99 under 50 us (a rate reached only by catching up late
# is not held). Prints Markdown rows for BENCHMARKS.md.
#
# "Held" is not monotone in the rate: the generator's lag falls as the rate
# rises (a thread that wakes every few microseconds is rarely descheduled
# between two sends, one that sleeps a millisecond pays a full wake-up
# each time; on the project's 2-CPU VM lag p99 was ~0.6 ms at 1,000/s while
# udp_rr with 1 flow held 368,000/s at 38 us). So the search scans instead of
# stopping at the first failure: it doubles from --start up to --max,
# probing every rate, and stops early only once the pair has saturated
# (achieved below 99 % of offered at two rates in a row: no higher rate can
# be held). Then it bisects between the highest held rate and the probe
# above it for --steps steps. The row reports the highest rate held, and
# the lower rates that were not held, if any. Each probe is one
# `thrum run TEST --rate R -l D --json`. Client and server share the
# machine, so this is the capacity of the pair on it, not of the generator
# alone; run it on an otherwise idle machine. Traffic goes to 127.0.0.1
# only; an EXIT trap stops the server.
set -euo pipefail

thrum=target/release/thrum
duration=3s
start=1000
max=4000000
steps=4
tests="udp_rr tcp_rr"
flows_list="1 16"
port=12897
lag_us=50

usage() {
	cat <<'EOF'
usage: bench/open-loop-capacity.sh [options]
  --thrum PATH     thrum binary (default target/release/thrum)
  --duration D     measurement window per probe (default 3s)
  --start R        first rate probed, transactions/s (default 1000)
  --max R          highest rate scanned (default 4000000)
  --steps N        bisection steps after the scan (default 4)
  --tests LIST     space-separated (default "udp_rr tcp_rr")
  --flows LIST     space-separated flow counts (default "1 16")
  --lag-us N       generator lag p99 bound for "held", us (default 50)
  --quick          smoke check: --duration 1s --steps 1 --max 20000
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--thrum) thrum=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--start) start=$2; shift 2 ;;
	--max) max=$2; shift 2 ;;
	--steps) steps=$2; shift 2 ;;
	--tests) tests=$2; shift 2 ;;
	--flows) flows_list=$2; shift 2 ;;
	--lag-us) lag_us=$2; shift 2 ;;
	--quick) duration=1s; steps=1; max=20000; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

[ -x "$thrum" ] || { echo "no thrum binary at $thrum (cargo build --release)" >&2; exit 1; }

"$thrum" server --listen 127.0.0.1 -p "$port" >/dev/null 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
sleep 0.3

# probe TEST FLOWS RATE: prints "held kept_up achieved lag_p99_ns service_p50_ns"
# (kept_up: achieved within 1 % of offered, whatever the lag)
probe() {
	local test=$1 flows=$2 rate=$3 threads=$(( $2 < 2 ? $2 : 2 ))
	local extra=()
	[ "$test" = tcp_rr ] && extra+=(--nodelay)
	timeout 120 "$thrum" run "$test" -H "127.0.0.1:$port" --rate "$rate" \
		-F "$flows" -T "$threads" -l "$duration" --warmup 1s "${extra[@]}" --json |
		python3 -c '
import json, sys
rate = float(sys.argv[1])
s = json.load(sys.stdin)["summary"]
if s.get("error"):
    print("0 0 0 0 0"); sys.exit()
a = s.get("achieved_per_s") or 0.0
lag = (s.get("generator_lag_ns") or {}).get("p99", 10**12)
svc = (s.get("service_latency_ns") or {}).get("p50", 0)
kept_up = abs(a / rate - 1) < 0.01
held = kept_up and lag < float(sys.argv[2]) * 1000
print(int(held), int(kept_up), round(a, 1), lag, svc)
' "$rate" "$lag_us" || echo "0 0 0 0 0"
}

echo "| test | flows | highest rate held (/s) | achieved (/s) | generator lag p99 | service p50 | not held below it (/s) |"
echo "|---|---|---|---|---|---|---|"
for test in $tests; do
	for flows in $flows_list; do
		# good: highest rate held so far; above: the probe just above it.
		good=0 good_line="" above=0 first_line="" missed="" short=0 rate=$start
		while [ "$rate" -le "$max" ]; do
			line=$(probe "$test" "$flows" "$rate")
			if [ -z "$first_line" ]; then first_line=$line; fi
			read -r held kept_up _ <<<"$line"
			if [ "$held" = 1 ]; then
				# Held above earlier failures: those were the generator's
				# wake-ups, not its limit.
				good=$rate good_line=$line above=0 short=0
			else
				if [ "$above" = 0 ]; then above=$rate; fi
				missed="$missed $rate"
				if [ "$kept_up" = 1 ]; then short=0; else short=$((short + 1)); fi
				# Saturated twice in a row: no higher rate is held.
				if [ "$short" -ge 2 ]; then break; fi
			fi
			rate=$((rate * 2))
		done
		if [ "$good" -gt 0 ] && [ "$above" -gt 0 ]; then
			bad=$above
			for _ in $(seq "$steps"); do
				mid=$(((good + bad) / 2))
				line=$(probe "$test" "$flows" "$mid")
				if [ "${line%% *}" = 1 ]; then good=$mid good_line=$line; else bad=$mid; fi
			done
		fi
		# The rates below the highest held one that were not held.
		below=""
		for r in $missed; do
			if [ "$r" -lt "$good" ]; then below="$below $r"; fi
		done
		below=${below# }
		if [ "$good" -gt 0 ]; then
			read -r _ _ achieved lag svc <<<"$good_line"
			note=""
			if [ "$above" = 0 ]; then note=" (held up to --max)"; fi
			echo "| $test | $flows | $good$note | $achieved | ${lag} ns | ${svc} ns | ${below:-none} |"
		else
			# No rate was held: show the first probe's figures.
			read -r _ _ achieved lag svc <<<"$first_line"
			echo "| $test | $flows | none from $start to $max | $achieved | ${lag} ns | ${svc} ns | all |"
		fi
	done
done
