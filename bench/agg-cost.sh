#!/usr/bin/env bash
# The aggregate's own cost (issue 21, item 5): `thrum agg --tests rr` (each
# stream a 1-byte tcp_rr session, all streams threads of one process)
# against netperf's aggregate of one process per stream (concurrent
# `netperf -t TCP_RR` processes, as runemomniaggdemo.sh starts them), on
# loopback, at the stream counts of --streams. Prints a Markdown report: a
# row per stream count and tool, with transactions/s and CPU-s per million
# transactions.
#
# Both tools run the same ramp, the aggregate method's: 1, 2, 4 ... streams
# up to N, one more doubling every --step seconds, every stream running to
# the end of the ramp (thrum agg's `--max-streams N --step S`; netperf
# processes started at each step's start with `-l` the rest of the ramp).
# The figures cover the whole ramp: transactions are every stream's own
# count (thrum: `streams[].summary.transactions` of results.json; netperf:
# THROUGHPUT x ELAPSED_TIME of each process), CPU is user + system time of
# every process of the tool, client and server, from wait4() rusage
# (bench/compare_helper.py `run` and `par`, as compare.sh takes it), so the
# aggregate's own threads, timers and samplers are all charged.
#
# netperf's servers: one `netserver -D -f` per netperf process, on its own
# port, all under one `compare_helper.py par`. A forking netserver (the one
# netserver of runemomniaggdemo.sh) ignores SIGCHLD, so the CPU of its
# per-test children would be charged to no process; a non-forking one
# serves one test at a time.
#
# Without netperf and netserver on PATH only thrum runs (the report says
# so). Traffic goes to 127.0.0.1 only; every process runs under a deadline
# and an EXIT trap stops what is still running.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bench/agg-cost.sh [options]
  --streams LIST  stream counts, comma-separated, each 1..64 (default 4,16)
  --step S        seconds per ramp step, 3..600 (default 10)
  --runs N        runs per tool and stream count, 1..20 (default 3)
  --quick         smoke check: --streams 4 --step 3 --runs 1
  --out FILE      write the Markdown report there (default: stdout)
  --thrum PATH    thrum binary (default target/release/thrum, built with
                  `cargo build --release` first)
  --quiet-wait S  before each run, wait up to S s (default 20) for the rest
                  of the machine to be nearly idle (0 disables)
EOF
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HELPER="$ROOT/bench/compare_helper.py"
INVOCATION="bench/agg-cost.sh${*:+ $*}"
STREAMS="4,16"
STEP=10
RUNS=3
OUT=""
THRUM=""
QUIET_WAIT=20
QUIET_THRESH=0.25
while (($#)); do
	case "$1" in
	--streams | --step | --runs | --out | --thrum | --quiet-wait)
		(($# >= 2)) || { echo "agg-cost.sh: $1 needs a value" >&2; exit 2; } ;;
	esac
	case "$1" in
	--streams) STREAMS="$2"; shift 2 ;;
	--step) STEP="$2"; shift 2 ;;
	--runs) RUNS="$2"; shift 2 ;;
	--quick) STREAMS=4; STEP=3; RUNS=1; shift ;;
	--out) OUT="$2"; shift 2 ;;
	--thrum) THRUM="$2"; shift 2 ;;
	--quiet-wait) QUIET_WAIT="$2"; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "agg-cost.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
done
in_range() { [[ "$1" =~ ^[0-9]+$ ]] && (($1 >= $2 && $1 <= $3)); }
for n in ${STREAMS//,/ }; do
	in_range "$n" 1 64 || { echo "agg-cost.sh: --streams: '$n' is not a stream count in 1..64" >&2; exit 2; }
done
in_range "$STEP" 3 600 || { echo "agg-cost.sh: --step must be whole seconds in 3..600 (thrum agg's least step is 3 s)" >&2; exit 2; }
in_range "$RUNS" 1 20 || { echo "agg-cost.sh: --runs must be 1..20" >&2; exit 2; }
in_range "$QUIET_WAIT" 0 600 || { echo "agg-cost.sh: --quiet-wait must be whole seconds in 0..600" >&2; exit 2; }

PY="$(python3 -c 'import sys; print(sys.executable)')"
command -v ss >/dev/null || { echo "agg-cost.sh: ss is required" >&2; exit 2; }

if [[ -z "$THRUM" ]]; then
	THRUM="$ROOT/target/release/thrum"
	echo "agg-cost.sh: cargo build --release" >&2
	(cd "$ROOT" && cargo build --release --quiet)
fi
[[ -x "$THRUM" ]] || { echo "agg-cost.sh: $THRUM is not executable" >&2; exit 1; }
THRUM="$(realpath "$THRUM")"
TOOLS=(thrum)
ABSENT=""
if command -v netperf >/dev/null && command -v netserver >/dev/null; then
	TOOLS+=(netperf)
else
	ABSENT="netperf (netperf or netserver not on PATH): thrum alone"
fi

P_THRUM=12930
P_NETPERF=12940 # netserver k listens on P_NETPERF + k
for p in $P_THRUM $(seq "$P_NETPERF" $((P_NETPERF + 63))); do
	if [[ -n "$(ss -Hltun "sport = :$p")" ]]; then
		echo "agg-cost.sh: port $p is already in use (a leftover server?)" >&2
		exit 1
	fi
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/thrum-agg-cost.XXXXXX")"
CUR_SRV=""
CUR_CLI=""
FAILED=0
KEEP=0
# shellcheck source=bench/proc.sh
. "$ROOT/bench/proc.sh"
bench_traps
cd "$WORK"

# The ramp of thrum agg (src/agg/ramp.rs): 1, 2, 4 ... below N, then N.
ramp() {
	local n="$1" c=1
	while ((c < n)); do
		echo "$c"
		c=$((c * 2))
	done
	echo "$n"
}

# tool_cmds TOOL N: set SRV and CLI (argument arrays) and PORTS.
tool_cmds() {
	local tool="$1" n="$2" steps i k=0 c
	mapfile -t steps < <(ramp "$n")
	if [[ "$tool" == thrum ]]; then
		PORTS=($P_THRUM)
		SRV=("$THRUM" server --port "$P_THRUM" --listen 127.0.0.1)
		CLI=("$THRUM" agg --hosts "127.0.0.1:$P_THRUM" --tests rr --max-streams "$n"
			--step "${STEP}s" --out "$D/agg")
		return
	fi
	PORTS=()
	SRV=("$PY" "$HELPER" par)
	CLI=("$PY" "$HELPER" par)
	# Stream k starts with the step that first holds it and runs to the end
	# of the ramp, as thrum agg's streams do.
	for ((i = 0; i < ${#steps[@]}; i++)); do
		for ((c = k; c < steps[i]; c++)); do
			((k == 0)) || { SRV+=(:::); CLI+=(:::); }
			SRV+=(netserver -D -f -p $((P_NETPERF + k)) -L "127.0.0.1,4")
			PORTS+=($((P_NETPERF + k)))
			CLI+=(sh -c "sleep $((i * STEP)); exec netperf -H 127.0.0.1,4 -p $((P_NETPERF + k)) \
-t TCP_RR -l $(((${#steps[@]} - i) * STEP)) -P 0 -- -r 1,1 -o THROUGHPUT,ELAPSED_TIME")
			k=$((k + 1))
		done
	done
}

RESULTS="$WORK/results.tsv"
: >"$RESULTS"
CMDS="$WORK/cmds.txt"
: >"$CMDS"

# One line: transactions, seconds the ramp lasted, then the client's and the
# server's CPU seconds.
parse() { # tool dir
	"$PY" - "$1" "$2" <<'PYEOF'
import json, sys
tool, d = sys.argv[1], sys.argv[2]
def cpu(name):
    u, s, _ = open(f"{d}/{name}.ru").read().split()
    return float(u) + float(s)
if tool == "thrum":
    t = json.load(open(f"{d}/agg/results.json"))["tests"][0]
    streams = t["streams"]
    bad = [s for s in streams if s.get("error") or not s["summary"]]
    if bad:
        raise SystemExit(f"{len(bad)} stream(s) failed: {bad[0].get('error')}")
    done = sum(s["summary"]["transactions"] for s in streams)
    secs = t["end"] - t["start"]
else:
    lines = [l.split(",") for l in open(f"{d}/cli.out").read().split() if l.strip()]
    done = sum(float(rate) * float(el) for rate, el in lines)
    secs = max(float(el) for _, el in lines)
print(f"{done:.0f}\t{secs:.3f}\t{cpu('cli'):.6f}\t{cpu('srv'):.6f}")
PYEOF
}

run_one() { # tool n run
	local tool="$1" n="$2" run="$3" status nsteps
	D="$WORK/$tool-$n-$run"
	mkdir -p "$D"
	tool_cmds "$tool" "$n"
	nsteps=$(ramp "$n" | wc -l)
	((run > 1)) || printf '%s, %s streams:\n  server: %s\n  client: %s\n' "$tool" "$n" \
		"$(qjoin "${SRV[@]}")" "$(qjoin "${CLI[@]}")" >>"$CMDS"
	if ((QUIET_WAIT > 0)); then
		"$PY" "$HELPER" quiet "$QUIET_WAIT" "$QUIET_THRESH" >/dev/null
	fi
	start_and_run "$D" $((nsteps * STEP + 90)) $((nsteps * STEP + 60))
	status="$STATUS"
	stop_server
	local parsed="-	-	-	-"
	if [[ "$status" == ok ]]; then
		parsed="$(parse "$tool" "$D" 2>"$D/parse.err")" || { status="unparsable-output"; parsed="-	-	-	-"; }
	fi
	[[ "$status" == ok ]] || FAILED=$((FAILED + 1))
	printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$tool" "$run" "$status" "$parsed" >>"$RESULTS"
	echo "agg-cost.sh: $tool $n streams run $run/$RUNS: $status ${parsed//	/ }" >&2
	[[ "$status" == ok ]] || tail -n 3 "$D/cli.err" "$D/srv.err" "$D/parse.err" 2>/dev/null | sed 's/^/  | /' >&2 || true
}

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
for n in ${STREAMS//,/ }; do
	# Alternate the tools within each round, so that drift hits both alike.
	for ((run = 1; run <= RUNS; run++)); do
		for tool in "${TOOLS[@]}"; do run_one "$tool" "$n" "$run"; done
	done
done
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"

report() {
	"$PY" - "$RESULTS" <<'PYEOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
print("| streams (ramp) | tool | runs ok | transactions/s over the ramp, median (min–max) "
      "| CPU-s per M transactions, client + server, median (min–max) | CPU thrum/netperf |")
print("|---:|---|---:|---:|---:|---:|")
med_cpu = {}
out = []
for n in dict.fromkeys(r[0] for r in rows):
    for tool in dict.fromkeys(r[1] for r in rows if r[0] == n):
        mine = [r for r in rows if r[0] == n and r[1] == tool]
        ok = [r for r in mine if r[3] == "ok"]
        if not ok:
            out.append((n, tool, f"| {n} | {tool} | 0/{len(mine)} | failed | failed | |"))
            continue
        rate = [float(r[4]) / float(r[5]) for r in ok]
        cpu = [(float(r[6]) + float(r[7])) / (float(r[4]) / 1e6) for r in ok]
        med_cpu[n, tool] = statistics.median(cpu)
        out.append((n, tool, f"| {n} | {tool} | {len(ok)}/{len(mine)} | "
                    f"{statistics.median(rate):,.0f} ({min(rate):,.0f}–{max(rate):,.0f}) | "
                    f"{statistics.median(cpu):.2f} ({min(cpu):.2f}–{max(cpu):.2f}) |"))
for n, tool, line in out:
    a, b = med_cpu.get((n, "thrum")), med_cpu.get((n, "netperf"))
    ratio = f" {a / b:.2f} |" if tool == "thrum" and a and b else " — |"
    print(line + ratio)
PYEOF
}

{
	echo "## The aggregate's own cost: thrum agg against netperf processes (issue 21, item 5)"
	echo
	echo "Produced by \`$INVOCATION\` on $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs" \
		"($(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), kernel $(uname -r);" \
		"load average before / after: $LOAD_BEFORE / $LOAD_AFTER. thrum: $("$THRUM" --version)."
	[[ -z "$ABSENT" ]] || { echo; echo "Absent: $ABSENT."; }
	echo
	echo "Each run is the aggregate method's ramp on loopback, 1-byte tcp_rr with one transaction in" \
		"flight per stream: 1, 2, 4 … streams up to the row's count, one step every $STEP s, every" \
		"stream running to the end. thrum: \`thrum agg --tests rr --max-streams N\` (one process, a" \
		"thread and a control session per stream) against one \`thrum server\`; netperf: one" \
		"\`netperf -t TCP_RR -- -r 1,1\` process per stream, each against its own \`netserver -f\`." \
		"Transactions are every stream's own count over the ramp; CPU is user + system time of" \
		"every process of the tool, clients and servers, from wait4(). Lower CPU per transaction" \
		"is better; CPU thrum/netperf below 1 favours thrum (issue 21's target at 16 streams: ≤ 1)."
	echo
	report
	echo
	echo "Commands (run 1 of each):"
	echo
	echo '```'
	cat "$CMDS"
	echo '```'
} >"$WORK/report.md"
if [[ -n "$OUT" ]]; then
	cp "$WORK/report.md" "$OUT"
	echo "agg-cost.sh: wrote $OUT ($FAILED failed runs)" >&2
else
	cat "$WORK/report.md"
fi
((FAILED == 0)) || exit 1
