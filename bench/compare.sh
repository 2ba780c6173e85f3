#!/usr/bin/env bash
# Side-by-side benchmark of thrum against the usual peers (netperf, neper,
# sockperf, qperf, iperf3) on loopback, written to a Markdown report (issue 2).
#
# The peers are not built or installed by this script: it uses whichever of
# them are on PATH and lists the missing ones in the report. iperf3, sockperf
# and qperf are Debian packages; netperf (configure --enable-burst) and neper
# are built from their upstream sources, outside this repository. neper's
# binaries are expected as neper-tcp_rr / neper-tcp_stream / neper-udp_rr /
# neper-udp_stream, since a bare "tcp_rr" is too generic a name to put on PATH.
#
# All traffic goes to 127.0.0.1. Every process runs under a deadline, and an
# EXIT trap stops whatever is still running.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bench/compare.sh [options]
  --runs N        runs per tool and row (default 5)
  --duration S    seconds per run (default 5)
  --quick         smoke check: --runs 2 --duration 2
  --out FILE      report path (default BENCHMARKS.md in the repo root)
  --thrum PATH    thrum binary (default target/release/thrum, built with
                  `cargo build --release` first)
  --no-thrum      peers only (ratios are then left out)
  --rows LIST     comma-separated subset of: rr,rr_pinned,rr_agg,crr,crr_agg,cc,
                  stream,stream_split,stream_pinned,stream_16k,stream_default,
                  stream_f2,
                  stream_f8,maerts,bidir (TCP), udp_rr,udp_rr_pinned,
                  udp_rr_agg,udp_stream
                  (UDP), scale (10,000 tcp_rr flows, thrum only); "tcp",
                  "udp" and "scale" stand for their groups (default: all)
  --tools LIST    comma-separated subset of:
                  thrum,thrum_uring,thrum_epoll,thrum_rst,floor,netperf,neper,
                  sockperf,qperf,iperf3
                  (thrum_uring, thrum_epoll: thrum --driver uring or
                  --driver epoll, in the tcp_rr and udp_rr aggregate rows,
                  where plain thrum's --driver auto runs io_uring;
                  thrum_uring also in the tcp_crr and tcp_cc rows, where
                  auto runs epoll or the blocking driver;
                  thrum_rst: thrum --close rst, in the tcp_crr rows, where
                  it is compared with neper, and in the tcp_cc row)
                  (floor: bench/floor, the minimal blocking reference, built
                  with cargo from its own manifest)
  --quiet-wait S  before each run, wait up to S s (default 20) for the rest
                  of the machine to be nearly idle (0 disables)
  --keep          keep the per-run logs directory
Exits 1 if any run failed (the report is still written, failed runs marked).
EOF
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HELPER="$ROOT/bench/compare_helper.py"
# How to regenerate the report, for its header. --keep only keeps the scratch
# logs, so it is left out.
args=()
for a in "$@"; do [[ "$a" == --keep ]] || args+=("$a"); done
INVOCATION="bench/compare.sh${args[*]:+ ${args[*]}}"

RUNS=5
DURATION=5
OUT="$ROOT/BENCHMARKS.md"
THRUM=""
NO_THRUM=0
TCP_ROWS="rr rr_pinned rr_agg crr crr_agg cc stream stream_split stream_pinned stream_16k stream_default stream_f2 stream_f8 maerts bidir"
UDP_ROWS="udp_rr udp_rr_pinned udp_rr_agg udp_stream"
SCALE_ROWS="scale"
ROWS="tcp,udp,scale"
TOOLS="thrum,thrum_uring,thrum_epoll,thrum_rst,floor,netperf,neper,sockperf,qperf,iperf3"
KEEP=0
QUIET_WAIT=20
# Busy CPUs, outside the benchmark, below which the machine counts as quiet.
QUIET_THRESH=0.25
while (($#)); do
	case "$1" in
	--runs | --duration | --out | --thrum | --rows | --tools | --quiet-wait)
		(($# >= 2)) || { echo "compare.sh: $1 needs a value" >&2; exit 2; } ;;
	esac
	case "$1" in
	--runs) RUNS="$2"; shift 2 ;;
	--duration) DURATION="$2"; shift 2 ;;
	--quick) RUNS=2; DURATION=2; shift ;;
	--out) OUT="$2"; shift 2 ;;
	--thrum) THRUM="$2"; shift 2 ;;
	--no-thrum) NO_THRUM=1; shift ;;
	--rows) ROWS="$2"; shift 2 ;;
	--tools) TOOLS="$2"; shift 2 ;;
	--quiet-wait) QUIET_WAIT="$2"; shift 2 ;;
	--keep) KEEP=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "compare.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "--runs must be a positive integer" >&2; exit 2; }
[[ "$DURATION" =~ ^[1-9][0-9]*$ ]] || { echo "--duration must be a positive integer (seconds)" >&2; exit 2; }
[[ "$QUIET_WAIT" =~ ^[0-9]+$ ]] || { echo "--quiet-wait must be a whole number of seconds" >&2; exit 2; }
rows=()
for r in ${ROWS//,/ }; do
	case "$r" in
	tcp) rows+=($TCP_ROWS) ;;
	udp) rows+=($UDP_ROWS) ;;
	scale) rows+=($SCALE_ROWS) ;;
	rr | rr_pinned | rr_agg | crr | crr_agg | cc | stream | stream_split | stream_pinned | stream_16k | stream_default | \
		stream_f2 | stream_f8 | maerts | bidir | udp_rr | udp_rr_pinned | udp_rr_agg | udp_stream)
		rows+=("$r") ;;
	*) echo "unknown row $r" >&2; exit 2 ;;
	esac
done
ROWS="${rows[*]}"
for t in ${TOOLS//,/ }; do
	case "$t" in
	thrum | thrum_uring | thrum_epoll | thrum_rst | floor | netperf | neper | sockperf | qperf | iperf3) ;;
	*) echo "unknown tool $t" >&2; exit 2 ;;
	esac
done
OUT="$(realpath -m "$OUT")"

# Resolve the real interpreter once: a pyenv-style shim costs tens of ms per
# call, and the helper is started twice per run.
PY="$(python3 -c 'import sys; print(sys.executable)')"

for t in ss taskset; do
	command -v "$t" >/dev/null || { echo "compare.sh: $t is required" >&2; exit 2; }
done

# Fixed ports, one set per tool, so that a leftover server of one tool can
# never answer another tool's client. Checked free before starting.
P_THRUM=12880
P_NETPERF=12865
# The aggregate UDP_RR row runs a second netserver (see tool_cmds).
P_NETPERF_B=12869
P_NEPER_CTL=12866
P_NEPER_DATA=12867
P_IPERF3=12871
P_SOCKPERF=12872
P_QPERF=12874
P_QPERF_DATA=12875
P_FLOOR=12876

want_tool() { [[ ",$TOOLS," == *",$1,"* ]]; }

# ---------------------------------------------------------------- thrum binary
if ((NO_THRUM)) || ! want_tool thrum; then
	NO_THRUM=1
elif [[ -z "$THRUM" ]]; then
	# Default binary: always (re)build, so that a stale binary from an older
	# tree is never benchmarked; a no-op when it is up to date.
	THRUM="$ROOT/target/release/thrum"
	echo "compare.sh: cargo build --release" >&2
	# The revision is taken with the build, not when the report is written:
	# commits made while the benchmark runs are not in the binary measured.
	THRUM_REV="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no commit')"
	[[ -z "$(git -C "$ROOT" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null)" ]] ||
		THRUM_REV="$THRUM_REV, modified tree"
	(cd "$ROOT" && cargo build --release --quiet) || {
		echo "compare.sh: thrum does not build; use --no-thrum for peers only" >&2
		exit 1
	}
fi
if ((!NO_THRUM)); then
	[[ -x "$THRUM" ]] || { echo "compare.sh: $THRUM is not executable" >&2; exit 1; }
	THRUM="$(realpath "$THRUM")"
fi

# ------------------------------------------------------------ which peers exist
declare -A HAVE=()
ABSENT=()
# The floor (bench/floor) is this repository's own reference: built here, in
# its own package so that thrum's build and tests never see it.
FLOOR="$ROOT/bench/floor/target/release/thrum-floor"
if want_tool floor; then
	echo "compare.sh: cargo build --release (bench/floor)" >&2
	if (cd "$ROOT" && cargo build --release --quiet --manifest-path bench/floor/Cargo.toml); then
		HAVE[floor]=1
	else
		ABSENT+=("floor (bench/floor does not build)")
	fi
fi
check_peer() { # name binaries...
	local name="$1" b
	shift
	want_tool "$name" || return 0
	for b in "$@"; do
		if ! command -v "$b" >/dev/null; then
			ABSENT+=("$name ($b not on PATH)")
			return 0
		fi
	done
	HAVE[$name]=1
}
if ((!NO_THRUM)); then
	HAVE[thrum]=1
	want_tool thrum_uring && HAVE[thrum_uring]=1
	want_tool thrum_epoll && HAVE[thrum_epoll]=1
	want_tool thrum_rst && HAVE[thrum_rst]=1
fi
check_peer netperf netperf netserver
# neper has one binary per test: require only those of the selected rows.
neper_bins=()
for r in $ROWS; do
	case "$r" in
	rr | rr_pinned | rr_agg) neper_bins+=(neper-tcp_rr) ;;
	crr | crr_agg) neper_bins+=(neper-tcp_crr) ;;
	stream*) neper_bins+=(neper-tcp_stream) ;;
	udp_rr*) neper_bins+=(neper-udp_rr) ;;
	udp_stream) neper_bins+=(neper-udp_stream) ;;
	esac
done
check_peer neper $(printf '%s\n' "${neper_bins[@]}" | sort -u)
check_peer sockperf sockperf
check_peer qperf qperf
check_peer iperf3 iperf3

tools_for_row() { # prints the tools that take part in a row, thrum first
	local row="$1" t cands
	case "$row" in
	stream | stream_split | stream_pinned | stream_16k) cands="thrum floor netperf neper iperf3" ;;
	# Every tool at its own defaults: the floor has none of its own.
	stream_default) cands="thrum netperf neper iperf3" ;;
	# The server sends: netperf TCP_MAERTS and iperf3 -R; neither neper nor
	# the floor has a reverse stream.
	maerts) cands="thrum netperf iperf3" ;;
	# Both ways at once in one test: only iperf3 --bidir (netperf would
	# need two processes, a TCP_STREAM and a TCP_MAERTS, whose windows
	# do not line up).
	bidir) cands="thrum iperf3" ;;
	# Several flows: netperf and the floor run one flow per process.
	stream_f2 | stream_f8) cands="thrum neper iperf3" ;;
	udp_stream) cands="thrum netperf neper iperf3" ;;
	# Only thrum, neper and netperf (with burst) run many RR flows at once.
	# thrum (--driver auto) runs io_uring there, from 4 rr flows per worker;
	# thrum_epoll keeps the uring-vs-epoll comparison.
	udp_rr_agg) cands="thrum thrum_uring thrum_epoll netperf neper" ;;
	# netperf runs one flow per process: not in the 16-flow TCP rows.
	rr_agg) cands="thrum thrum_uring thrum_epoll neper" ;;
	# neper closes with a reset by default: thrum_rst is its like.
	# thrum_uring: connect, accept and close as io_uring operations.
	crr_agg) cands="thrum thrum_uring thrum_rst neper" ;;
	crr) cands="thrum thrum_uring thrum_rst netperf neper" ;;
	# neper has no connect-and-close test; netperf runs one flow.
	cc) cands="thrum thrum_uring thrum_rst netperf" ;;
	scale) cands="thrum" ;;
	*) cands="thrum floor netperf neper sockperf qperf" ;;
	esac
	for t in $cands; do
		[[ -n "${HAVE[$t]:-}" ]] && echo "$t"
	done
	return 0
}

# TCP listeners and bound UDP sockets alike: sockperf's UDP server and the
# UDP data ports of neper, qperf and iperf3 have no TCP listener.
for p in $P_THRUM $P_FLOOR $P_NETPERF $P_NETPERF_B $P_NEPER_CTL $P_NEPER_DATA $P_IPERF3 $P_SOCKPERF $P_QPERF $P_QPERF_DATA; do
	if [[ -n "$(ss -Hltun "sport = :$p")" ]]; then
		echo "compare.sh: port $p is already in use (a leftover server?)" >&2
		exit 1
	fi
done

# ------------------------------------------------------------- process control
WORK="$(mktemp -d "${TMPDIR:-/tmp}/thrum-compare.XXXXXX")"
CUR_SRV=""
CUR_CLI=""
FAILED=0
# shellcheck source=bench/proc.sh
. "$ROOT/bench/proc.sh"
bench_traps

# Run from the scratch directory: neper, for one, writes log files into its
# working directory unless told --nolog, and no tool should litter the repo.
cd "$WORK"

# tool_cmds TOOL ROW: set SRV, CLI (argument arrays), PORTS (the ports that
# tell the server is ready) and SELF_EXIT (1 if the server ends by itself
# after one test, so it is waited for instead of signalled).
tool_cmds() {
	local tool="$1" row="$2" d="$DURATION"
	SELF_EXIT=0
	case "$tool" in
	thrum | thrum_uring | thrum_epoll | thrum_rst)
		PORTS=($P_THRUM)
		SRV=("$THRUM" server --port "$P_THRUM" --listen 127.0.0.1 --max-flows 10000)
		# --warmup 0s: the peers measure from their first transaction, and
		# the CPU figures assume no traffic outside the -l window.
		local common=(-H "127.0.0.1:$P_THRUM" -l "${d}s" --warmup 0s)
		[[ "$tool" == thrum_uring ]] && common+=(--driver uring)
		[[ "$tool" == thrum_epoll ]] && common+=(--driver epoll)
		[[ "$tool" == thrum_rst ]] && common+=(--close rst)
		case "$row" in
		stream | stream_split | stream_pinned)
			# 64 KiB sends and receives, as every stream tool here uses.
			CLI=("$THRUM" run tcp_stream "${common[@]}" -m 64K -M 64K --json) ;;
		stream_16k)
			# netperf's default send size, and thrum's default receive
			# size (128K): netperf receives by default as much as its
			# socket's initial SO_RCVBUF, 128 KiB here (tcp_rmem).
			CLI=("$THRUM" run tcp_stream "${common[@]}" -m 16K --json) ;;
		stream_default)
			# thrum's own defaults: 128 KiB sends and receives.
			CLI=("$THRUM" run tcp_stream "${common[@]}" --json) ;;
		maerts)
			# -m is the sender's size, here the server's.
			CLI=("$THRUM" run tcp_maerts "${common[@]}" -m 64K -M 64K --json) ;;
		bidir)
			# throughput_bps is the sum of both directions.
			CLI=("$THRUM" run tcp_bidir "${common[@]}" -m 64K -M 64K --json) ;;
		stream_f2 | stream_f8)
			CLI=("$THRUM" run tcp_stream "${common[@]}" -m 64K -M 64K -F "${row#stream_f}" -T 2 --json) ;;
		udp_stream)
			CLI=("$THRUM" run udp_stream "${common[@]}" -m 1472 --json) ;;
		udp_rr | udp_rr_pinned)
			CLI=("$THRUM" run udp_rr "${common[@]}" -r "1,1" --json) ;;
		udp_rr_agg)
			CLI=("$THRUM" run udp_rr "${common[@]}" -r "1,1" -F 16 -T 2 -b 16 --json) ;;
		rr_agg)
			CLI=("$THRUM" run tcp_rr "${common[@]}" -r "1,1" -F 16 -T 2 --json) ;;
		crr)
			CLI=("$THRUM" run tcp_crr "${common[@]}" -r "1,1" --json) ;;
		crr_agg)
			CLI=("$THRUM" run tcp_crr "${common[@]}" -r "1,1" -F 16 -T 2 --json) ;;
		cc)
			CLI=("$THRUM" run tcp_cc "${common[@]}" --json) ;;
		scale)
			# Needs 10,000+ descriptors per process: the server is separate.
			CLI=("$THRUM" run tcp_rr "${common[@]}" -r "1,1" -F 10000 -T 2 --json) ;;
		*)
			CLI=("$THRUM" run tcp_rr "${common[@]}" -r "1,1" --json) ;;
		esac
		;;
	floor)
		# One test per server process; it exits when the client is done.
		PORTS=($P_FLOOR)
		SELF_EXIT=1
		local t=tcp_rr send=65536 recv=65536
		case "$row" in
		stream | stream_split | stream_pinned) t=tcp_stream ;;
		stream_16k) t=tcp_stream send=16384 recv=131072 ;;
		udp_rr | udp_rr_pinned) t=udp_rr ;;
		esac
		SRV=("$FLOOR" serve "$t" --port "$P_FLOOR" --bind 127.0.0.1 -M "$recv")
		CLI=("$FLOOR" run "$t" --connect "127.0.0.1:$P_FLOOR" -l "$d" -m "$send")
		;;
	netperf)
		# -D: stay in the foreground; -f: serve tests in this process instead
		# of forking a child per test, so that the measured pid does the work.
		PORTS=($P_NETPERF)
		SRV=(netserver -D -f -p "$P_NETPERF" -L "127.0.0.1,4")
		local common=(-H "127.0.0.1,4" -p "$P_NETPERF" -l "$d" -P 0)
		case "$row" in
		stream | stream_split | stream_pinned)
			# -f m, not -f b: netperf's "b" divides by 1 and so prints
			# bytes/s while labelling them "10^0bits/s".
			CLI=(netperf "${common[@]}" -t TCP_STREAM -f m -- -m 64K -M 64K -o THROUGHPUT) ;;
		stream_16k | stream_default)
			# netperf's defaults: no -m, no -M.
			CLI=(netperf "${common[@]}" -t TCP_STREAM -f m -- -o THROUGHPUT) ;;
		maerts)
			# The test-specific -m and -M take "local,remote" pairs, and a
			# leading comma sets the second alone: -m ,64K is netserver's
			# send size (a bare -m 64K would set netperf's own, which does
			# not send here, and netserver would send 16 KiB), -M ,64K is
			# netperf's receive size. THROUGHPUT is what netperf received.
			CLI=(netperf "${common[@]}" -t TCP_MAERTS -f m -- -m ,64K -M ,64K -o THROUGHPUT) ;;
		udp_stream)
			# THROUGHPUT of a UDP_STREAM is the receiver's; the call counts
			# give the loss.
			CLI=(netperf "${common[@]}" -t UDP_STREAM -f m
				-- -m 1472 -o THROUGHPUT,LOCAL_SEND_CALLS,REMOTE_RECV_CALLS) ;;
		udp_rr | udp_rr_pinned)
			# The call counts tell whether a request or response was lost.
			CLI=(netperf "${common[@]}" -t UDP_RR
				-- -r "1,1" -o THROUGHPUT,LOCAL_SEND_CALLS,LOCAL_RECV_CALLS) ;;
		udp_rr_agg)
			# netperf runs one flow per process, so two processes at once,
			# with -b 16 each (needs netperf built with --enable-burst). A
			# non-forking netserver serves one test at a time, and a forking
			# one ignores SIGCHLD, which drops its children's CPU from every
			# rusage; so two -f netservers, one per client, each pair under
			# one `compare_helper.py par` whose rusage covers both.
			PORTS=($P_NETPERF $P_NETPERF_B)
			SRV=("$PY" "$HELPER" par netserver -D -f -p "$P_NETPERF" -L "127.0.0.1,4"
				::: netserver -D -f -p "$P_NETPERF_B" -L "127.0.0.1,4")
			local burst=(-t UDP_RR -l "$d" -P 0
				-- -r "1,1" -b 16 -o THROUGHPUT,LOCAL_SEND_CALLS,LOCAL_RECV_CALLS)
			CLI=("$PY" "$HELPER" par netperf -H "127.0.0.1,4" -p "$P_NETPERF" "${burst[@]}"
				::: netperf -H "127.0.0.1,4" -p "$P_NETPERF_B" "${burst[@]}") ;;
		crr)
			CLI=(netperf "${common[@]}" -t TCP_CRR -- -r "1,1" -o THROUGHPUT) ;;
		cc)
			# TCP_CC is not an omni test and takes no -o: its one result
			# line ends in the rate (connections/s).
			CLI=(netperf "${common[@]}" -t TCP_CC -- -r "1,1") ;;
		*)
			CLI=(netperf "${common[@]}" -t TCP_RR -- -r "1,1" -o THROUGHPUT) ;;
		esac
		;;
	neper)
		# The server is told the test length too: neper's server runs one test
		# and exits. -B 65536: 64 KiB sends and receives like the other stream
		# tools (neper's default is 16 KiB); -Q/-R are its defaults, spelled out.
		PORTS=($P_NEPER_CTL)
		SELF_EXIT=1
		local common=(--nolog -H 127.0.0.1 -C "$P_NEPER_CTL" -P "$P_NEPER_DATA" -l "$d")
		local bin=neper-tcp_rr opts=(-Q 1 -R 1)
		case "$row" in
		stream | stream_split | stream_pinned) bin=neper-tcp_stream opts=(-B 65536) ;;
		# neper's default buffer, 16 KiB for its writes and its reads.
		stream_16k | stream_default) bin=neper-tcp_stream opts=() ;;
		# Both ends get -F and -T, as in the RR aggregate rows.
		stream_f2 | stream_f8) bin=neper-tcp_stream opts=(-B 65536 -F "${row#stream_f}" -T 2) ;;
		# -B 1472: each send is one datagram of that size.
		udp_stream) bin=neper-udp_stream opts=(-B 1472) ;;
		udp_rr | udp_rr_pinned) bin=neper-udp_rr ;;
		# Both ends get -F and -T, as neper expects: the server opens one
		# data socket per thread.
		udp_rr_agg) bin=neper-udp_rr opts=(-Q 1 -R 1 -F 16 -T 2) ;;
		rr_agg) opts=(-Q 1 -R 1 -F 16 -T 2) ;;
		crr) bin=neper-tcp_crr ;;
		crr_agg) bin=neper-tcp_crr opts=(-Q 1 -R 1 -F 16 -T 2) ;;
		esac
		# neper's UDP server binds its data port apart from its control
		# listener: wait for both, or the first datagram could be refused.
		[[ "$bin" == neper-udp_* ]] && PORTS+=($P_NEPER_DATA)
		SRV=("$bin" "${common[@]}" "${opts[@]}")
		CLI=("$bin" -c "${common[@]}" "${opts[@]}")
		;;
	sockperf)
		# 14 bytes is sockperf's smallest message (its own header). UDP is
		# sockperf's default protocol.
		PORTS=($P_SOCKPERF)
		local proto=(--tcp)
		[[ "$row" == udp_* ]] && proto=()
		SRV=(sockperf server "${proto[@]}" -i 127.0.0.1 -p "$P_SOCKPERF")
		CLI=(sockperf ping-pong "${proto[@]}" -i 127.0.0.1 -p "$P_SOCKPERF" -t "$d" -m 14 --mps max)
		;;
	qperf)
		# -uu pins the units (ns, msgs) so the parser need not guess them.
		PORTS=($P_QPERF)
		local test=tcp_lat
		[[ "$row" == udp_* ]] && test=udp_lat
		SRV=(qperf -lp "$P_QPERF")
		CLI=(qperf 127.0.0.1 -lp "$P_QPERF" -ip "$P_QPERF_DATA" -t "$d" -m 1
			-vvs -vvt -uu "$test")
		;;
	iperf3)
		# -1: one test, then exit. -l 64K: 64 KiB sends and receives like the
		# other stream tools (iperf3's default is 128 KiB). For UDP, -b 0
		# lifts iperf3's default 1 Mbit/s pacing, as thrum and netperf are
		# unpaced, and -l 1472 is the datagram size.
		PORTS=($P_IPERF3)
		SELF_EXIT=1
		SRV=(iperf3 -s -B 127.0.0.1 -p "$P_IPERF3" -1)
		if [[ "$row" == udp_stream ]]; then
			CLI=(iperf3 -c 127.0.0.1 -p "$P_IPERF3" -t "$d" -u -b 0 -l 1472 --json)
		elif [[ "$row" == stream_f* ]]; then
			# -P N: N parallel streams; sum_received is their sum.
			CLI=(iperf3 -c 127.0.0.1 -p "$P_IPERF3" -t "$d" -l 64K -P "${row#stream_f}" --json)
		elif [[ "$row" == stream_16k ]]; then
			# -l is both the write and the read size: 16 KiB each.
			CLI=(iperf3 -c 127.0.0.1 -p "$P_IPERF3" -t "$d" -l 16K --json)
		elif [[ "$row" == stream_default ]]; then
			# iperf3's defaults: 128 KiB writes and reads.
			CLI=(iperf3 -c 127.0.0.1 -p "$P_IPERF3" -t "$d" --json)
		elif [[ "$row" == maerts ]]; then
			# -R: the server sends; sum_received is what the client read.
			CLI=(iperf3 -c 127.0.0.1 -p "$P_IPERF3" -t "$d" -l 64K -R --json)
		elif [[ "$row" == bidir ]]; then
			# Both ways at once; the parser adds sum_received_bidir_reverse.
			CLI=(iperf3 -c 127.0.0.1 -p "$P_IPERF3" -t "$d" -l 64K --bidir --json)
		else
			CLI=(iperf3 -c 127.0.0.1 -p "$P_IPERF3" -t "$d" -l 64K --json)
		fi
		;;
	esac
}

RESULTS="$WORK/results.tsv"
CMDS="$WORK/cmds.tsv"
META="$WORK/meta.tsv"
: >"$RESULTS"
: >"$CMDS"

run_one() { # row tool run
	local row="$1" tool="$2" run="$3"
	local d="$WORK/$row/$tool/$run" pin=() status=ok value=0 cu=0 su=0 cw=0 other=0
	local mbps=- loss=- note=- kdrops=0 parsed quiet stat0 stat1 cu_u cu_s su_u su_s
	mkdir -p "$d"
	if ((QUIET_WAIT > 0)); then
		quiet="$("$PY" "$HELPER" quiet "$QUIET_WAIT" "$QUIET_THRESH")"
		if awk -v q="$quiet" -v t="$QUIET_THRESH" 'BEGIN { exit !(q >= t) }'; then
			echo "  machine still busy ($quiet CPUs) after ${QUIET_WAIT}s; running anyway" >&2
		fi
	fi
	tool_cmds "$tool" "$row"
	[[ "$row" == *_pinned ]] && pin=(taskset -c 0)
	# stream_split: the client on CPU 0, the server on CPU 1, so that no
	# run depends on where the scheduler happens to put the two.
	local spin=("${pin[@]}") cpin=("${pin[@]}")
	[[ "$row" == stream_split ]] && spin=(taskset -c 1) cpin=(taskset -c 0)
	((run > 1)) || printf '%s\t%s\t%s\t%s\n' "$row" "$tool" \
		"$(qjoin "${spin[@]}" "${SRV[@]}")" "$(qjoin "${cpin[@]}" "${CLI[@]}")" >>"$CMDS"

	stat0="$("$PY" "$HELPER" stat)"
	SRV=("${spin[@]}" "${SRV[@]}")
	CLI=("${cpin[@]}" "${CLI[@]}")
	start_and_run "$d" $((DURATION + 60)) $((DURATION + 30))
	status="$STATUS"
	if ((SELF_EXIT)) && [[ "$status" == ok ]]; then
		local i
		for ((i = 0; i < 100; i++)); do
			kill -0 "$CUR_SRV" 2>/dev/null || break
			sleep 0.1
		done
	fi
	stop_server
	stat1="$("$PY" "$HELPER" stat)"

	if [[ "$status" == ok ]]; then
		# One line: value, Mbit/s, loss, note, tab-separated ("-" when absent).
		if parsed="$("$PY" "$HELPER" parse "$tool" "$row" "$d" 2>>"$d/parse.err")"; then
			IFS=$'\t' read -r value mbps loss note <<<"$parsed"
		else
			status="unparsable-output"
		fi
	fi
	if [[ "$status" == ok ]]; then
		if [[ -s "$d/cli.ru" && -s "$d/srv.ru" ]]; then
			read -r cu_u cu_s cw <"$d/cli.ru"
			read -r su_u su_s _ <"$d/srv.ru"
			cu="$(awk -v a="$cu_u" -v b="$cu_s" 'BEGIN { printf "%.6f", a + b }')"
			su="$(awk -v a="$su_u" -v b="$su_s" 'BEGIN { printf "%.6f", a + b }')"
			other="$(awk -v s0="$stat0" -v s1="$stat1" -v c="$cu" -v s="$su" 'BEGIN {
				split(s0, a, " "); split(s1, b, " ")
				o = (b[1] - a[1] - c - s) / (b[2] - a[2]); printf "%.3f", (o < 0 ? 0 : o) }')"
			# Datagrams the kernel dropped on receive during the run.
			kdrops="$(awk -v s0="$stat0" -v s1="$stat1" 'BEGIN {
				split(s0, a, " "); split(s1, b, " "); print b[3] - a[3] }')"
		else
			status="no-rusage"
		fi
	fi
	[[ "$status" == ok ]] || FAILED=$((FAILED + 1))
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$row" "$tool" "$run" "$status" "$value" "$cu" "$su" "$cw" "$other" \
		"$mbps" "$loss" "$note" "$kdrops" >>"$RESULTS"
	printf '%-13s %-8s run %d/%d: %-20s %14.2f  cpu client %.2fs server %.2fs, other load %.2f%s\n' \
		"$row" "$tool" "$run" "$RUNS" "$status" "$value" "$cu" "$su" "$other" \
		"$([[ "$note" == - ]] || echo " [$note]")" >&2
	if [[ "$status" != ok ]]; then
		echo "  logs: $d" >&2
		tail -n 3 "$d/cli.err" "$d/srv.err" "$d/parse.err" 2>/dev/null | sed 's/^/  | /' >&2 || true
	fi
}

# ------------------------------------------------------------------ main loop
n_runs=0
for row in $ROWS; do
	n=$(tools_for_row "$row" | wc -l)
	n_runs=$((n_runs + n * RUNS))
done
echo "compare.sh: $n_runs runs of ${DURATION}s: about $((n_runs * (DURATION + 2) / 60 + 1)) min," \
	"plus up to $((n_runs * QUIET_WAIT / 60)) min waiting for a quiet machine" >&2
((${#ABSENT[@]} == 0)) || printf 'compare.sh: absent: %s\n' "${ABSENT[@]}" >&2

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
for row in $ROWS; do
	mapfile -t row_tools < <(tools_for_row "$row")
	# Alternate tools within each round (A B C A B C ...) so that drift in
	# the machine's state spreads over all tools instead of biasing one.
	for ((run = 1; run <= RUNS; run++)); do
		for tool in "${row_tools[@]}"; do
			run_one "$row" "$tool" "$run"
		done
	done
done
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"

# --------------------------------------------------------------------- report
version_of() { # first line of a version command, or "?"
	local v
	v="$("$@" 2>&1 | grep -v '^$' | head -n 1)" || true
	echo "${v:-?}"
}
versions=()
if ((!NO_THRUM)); then
	versions+=("$(version_of "$THRUM" --version) (${THRUM_REV:-binary given with --thrum})")
fi
[[ -z "${HAVE[netperf]:-}" ]] || versions+=("$(version_of netperf -V)")
[[ -z "${HAVE[neper]:-}" ]] || versions+=("neper $(version_of "${neper_bins[0]}" -v)")
[[ -z "${HAVE[sockperf]:-}" ]] || versions+=("$(version_of sockperf --version)")
[[ -z "${HAVE[qperf]:-}" ]] || versions+=("$(version_of qperf --version)")
[[ -z "${HAVE[iperf3]:-}" ]] || versions+=("$(version_of iperf3 --version)")

{
	printf 'date\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
	printf 'invocation\t%s\n' "$INVOCATION"
	printf 'nproc\t%s\n' "$(nproc)"
	printf 'cpu_model\t%s\n' "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
	printf 'kernel\t%s\n' "$(uname -r)"
	printf 'load_before\t%s\n' "$LOAD_BEFORE"
	printf 'load_after\t%s\n' "$LOAD_AFTER"
	joined="$(printf '%s; ' "${versions[@]}")"
	printf 'versions\t%s\n' "${joined%; }"
	printf 'runs\t%s\n' "$RUNS"
	printf 'duration\t%s\n' "$DURATION"
	printf 'rows\t%s\n' "$ROWS"
	printf 'quiet_wait\t%s\n' "$QUIET_WAIT"
	printf 'quiet_thresh\t%s\n' "$QUIET_THRESH"
	for a in "${ABSENT[@]}"; do printf 'absent\t%s\n' "$a"; done
	((NO_THRUM)) && printf 'absent\t%s\n' "thrum (--no-thrum or not selected)"
	cat <<'EOF'
note	RR rows: every tool runs one connection doing strict ping-pong (one request outstanding), 1-byte request and response, and the rate is completed round trips per second. Nagle's algorithm never delays a segment in strict ping-pong (nothing else is unacknowledged), so it does not matter that only sockperf sets TCP_NODELAY.
note	netperf: TCP_RR `-r 1,1` reports transactions/s directly (THROUGHPUT). TCP_STREAM `-m 64K -M 64K` (64 KiB sends and receives; netserver's default receive is 128 KiB) with default (auto-tuned) socket buffers, `-f m` for 10^6 bits/s (not `-f b`, which netperf 2.7 prints as bytes/s despite its `10^0bits/s` label); netserver runs with `-f` so the test is served by the measured process, not a forked child.
note	neper: tcp_rr `throughput=` is transactions/s. tcp_stream `-B 65536` (64 KiB writes and reads like the others; neper's default is 16 KiB); `remote_throughput` is the bit rate the server read.
note	sockperf: ping-pong needs a 14-byte message at least (its header), so `-m 14` instead of 1; 13 more bytes per message is immaterial on loopback. Rate = ReceivedMessages / RunTime of its `[Total Run]` line, the whole `-t` window like the other tools (its `[Valid Duration]` line and latency statistics drop the first 400 ms and the last 50 ms). Its `avg-latency` is half the round-trip time (unless `--full-rtt`), so 1e6 / (2 x avg-latency in us) is the same figure over the valid window; check of one 2 s run: avg-latency 39.674 us gives 12,603/s, the valid-window counts 19528 / 1.550 s = 12,599/s.
note	qperf: tcp_lat is a ping-pong; it reports `latency` = half the round trip and `msg_rate` = messages in both directions per second, so round trips/s = msg_rate / 2 = 1e9 / (2 x latency in ns). The script uses the client's received-message count over its run time (`loc_recv_msgs / loc_real_time`), which is the same number (check: latency 39652 ns, msg_rate 25220/s, 25219 round trips in 2 s = 12,610/s). qperf cannot bind its server to one address; it listens on all, the client connects to 127.0.0.1.
note	iperf3: `-l 64K`, 64 KiB writes and reads like the others (default 128 KiB); rate = `end.sum_received.bits_per_second` from `--json`. The server runs with `-1` (one test, then exit).
note	thrum: tcp_rr `-r 1,1`; tcp_stream `-m 64K -M 64K` (64 KiB sends and receives like the peers; its defaults are 128K). Receive size matters on loopback: in spot checks 64 KiB reads gave neper about 25 Gbit/s against about 19 with 128 KiB, so every tool gets the same sizes. `--warmup 0s`: thrum by default sends 1 s of traffic before its measured window, the peers measure from their first transaction; without warm-up every tool is measured the same way, and no tool's CPU covers traffic outside its window. Its server is a separate `thrum server` process, like the peers' servers.
note	tcp_crr rows (crr, crr_agg): one connection per transaction (connect, 1-byte request, 1-byte response, close), rate = connections/s. The tools end a connection in two ways, and each is compared with its like. Graceful (FIN both ways, 10 segments per connection on loopback): thrum `tcp_crr -r 1,1` (`--close fin`, the default: the server closes first, so TIME_WAIT lands on the server) and netperf `TCP_CRR -- -r 1,1` (1 flow only: netperf runs one flow per process, so it is not in the 16-flow row). Reset (SO_LINGER 0, no TIME_WAIT): neper-tcp_crr `-Q 1 -R 1` (its default; `-F 16 -T 2` on both ends in the 16-flow row, `throughput=`; 8 segments per connection) and thrum_rst, thrum `tcp_crr -r 1,1 --close rst` (9 segments: the server still sends its FIN). So neper's thrum/peer column is thrum_rst over neper, and thrum_rst's own column is "—". Measured before this split (2026-11-22, 3 s, 16 flows): neper with `--time-wait` (graceful, TIME_WAIT on its client) ran 13,980 connections/s against 22,474 with its default reset. Every thrum connection also carries the 16-byte session token.
note	cc: tcp_cc, 1 flow: connect and close with no request or response, rate = connections/s, unpinned. thrum `tcp_cc` (the server closes first, so TIME_WAIT lands on the server), thrum_rst `tcp_cc --close rst` (the client aborts with SO_LINGER 0 once the server's FIN arrives), thrum_uring `tcp_cc --driver uring`; netperf `TCP_CC -- -r 1,1` (not an omni test: no `-o`, the rate is the last field of its result line). neper has no such test. Every thrum connection carries the 16-byte session token, which the server reads before it closes.
note	stream_split: the tcp_stream row again with every client pinned to CPU 0 and every server to CPU 1 (`taskset` on the whole process). Unpinned, loopback tcp_stream depends on where the scheduler puts the two ends, one CPU or two and which takes the softirq work, and every tool spans ±25 % over five runs; split, the spread is about ±7 %. Issue 7's tcp_stream targets are read from this row when it ran.
note	stream_pinned: the tcp_stream row again with both ends pinned to CPU 0 (`taskset -c 0` on the whole process), so that the two processes and the kernel's loopback work share one CPU and the rate is the tools' and the kernel's cost per byte, not the scheduler's placement.
note	stream_16k: tcp_stream at netperf's default sizes, unpinned: netperf `TCP_STREAM` without `-m`/`-M` sends 16 KiB per call (its send socket buffer's initial size) and receives 128 KiB per call (its receive buffer's initial size, tcp_rmem's default); thrum `-m 16K` with its default `-M 128K`; the floor `-m 16384`, server `-M 131072`; neper-tcp_stream with no `-B` (16 KiB writes and reads, its default); iperf3 `-l 16K` (its one size for writes and reads).
note	stream_default: tcp_stream with every tool at its own defaults, unpinned, the command a user types first: thrum `run tcp_stream` (128 KiB sends and receives), netperf `TCP_STREAM` without `-m`/`-M` (16 KiB sends, 128 KiB receives), neper-tcp_stream with no `-B` (16 KiB), iperf3 with no `-l` (128 KiB). The floor has no defaults of its own and is left out.
note	maerts: one flow, the server sends, the client receives, unpinned, 64 KiB sends and receives; rate = bits/s the client received. thrum `tcp_maerts -m 64K -M 64K` (`-m` is the sender's size, the server's here); netperf `TCP_MAERTS -- -m ,64K -M ,64K`: netperf's test options take `local,remote` pairs and a leading comma sets only the remote one, so `-m ,64K` is netserver's send size (a plain `-m 64K` sets netperf's own send size, unused in this test, and netserver sends 16 KiB) and `-M ,64K` netperf's receive size; THROUGHPUT is what netperf received. iperf3 `-R -l 64K`, `end.sum_received.bits_per_second` (the client's reads).
note	bidir: one connection carrying both directions at once, unpinned, 64 KiB sends and receives; rate = the sum of the two directions' received bits/s. thrum `tcp_bidir -m 64K -M 64K` (`summary.throughput_bps` is the sum; each way is `throughput_bps_c2s`/`_s2c`); iperf3 `--bidir -l 64K` (two connections, one each way), `end.sum_received` + `end.sum_received_bidir_reverse`. netperf has no test that sends both ways on one connection, so it is not in this row.
note	stream_f2, stream_f8: tcp_stream with 2 and 8 flows, 64 KiB sends and receives like the stream row, unpinned, rate = the sum over the flows of what the server read. thrum `-m 64K -M 64K -F N -T 2` (2 worker threads per end: one flow per thread, the blocking driver, at 2 flows; 4 flows per thread on epoll at 8); neper-tcp_stream `-B 65536 -F N -T 2` on both ends, `remote_throughput`; iperf3 `-l 64K -P N` (N streams in one process; iperf 3.12 runs them on one thread, later versions one thread per stream), `end.sum_received.bits_per_second`. netperf and the floor run one flow per process and are not in these rows.
note	rr_agg: tcp_rr with 16 flows on 2 threads, one transaction in flight per flow: thrum `-F 16 -T 2`, neper-tcp_rr `-F 16 -T 2` on both ends.
note	thrum_uring, thrum_epoll: thrum with `--driver uring` and with `--driver epoll` in the tcp_rr and udp_rr aggregate rows (io_uring: completion driver, multishot receive into provided buffers and sends queued with the ring; docs/design.md). Plain thrum runs `--driver auto`, which gives a worker of 4 or more tcp_rr or udp_rr flows to io_uring where the kernel has it: at 16 flows on 2 threads (8 per worker) that is io_uring, so thrum/thrum_uring is about 1 and thrum/thrum_epoll is what auto's choice gains over epoll (above 1: io_uring was faster). In the tcp_crr rows thrum_uring is thrum `--driver uring`, which runs tcp_crr on io_uring (connect, accept, receive, send and close as ring operations) where plain thrum's auto runs the blocking driver (1 flow) or epoll (16 flows): thrum/thrum_uring above 1 means auto's choice was faster (docs/performance.md).
note	scale: `thrum run tcp_rr -F 10000 -T 2` against a separate `thrum server` (10,000 sockets per process; the embedded server would need 20,000 in one). No peer runs 10,000 flows this way; the figures are thrum's `summary.setup_s` (first data socket to the server's `started`) and both processes' peak RSS (`max_rss_kb`).
note	floor: bench/floor (`thrum-floor`), this repository's minimal reference, not a peer: one blocking thread per end, no event loop, timers or statistics, the clock read every 64 transactions. tcp_rr: 1-byte write and read per transaction on a TCP_NODELAY socket; udp_rr: the same on connected UDP sockets (the server connects to its first peer); tcp_stream: 64 KiB writes and reads, rate = bytes the server read over the client's send window. Its thrum/peer column is thrum as a ratio of the floor (target: at least 0.95 for the RR rows).
note	iperf 2 (2.1.8) is installed but not compared: its `--bounceback` RR mode is paced in bursts rather than saturating and rejects 1-byte messages, and its stream mode adds nothing to iperf3.
note	CPU time is what the kernel charges to the two processes. On loopback most of the TCP/IP work of a send runs in the sender's own context (softirq on the way out of the send call) and is charged to it; work done by ksoftirqd threads is charged to nobody here.
EOF
	# The UDP notes only when a UDP row ran.
	[[ " $ROWS " != *" udp_"* ]] || cat <<'EOF'
note	UDP RR rows, one flow (udp_rr, udp_rr_pinned): strict ping-pong of 1-byte datagrams, rate = completed round trips per second. thrum `udp_rr -r 1,1` (plain send/recv with one transaction in flight; `environment.udp_io` says so). netperf `UDP_RR -- -r 1,1`, THROUGHPUT = transactions/s; netperf connects its socket, netserver answers with recvfrom/sendto. neper-udp_rr `-Q 1 -R 1`, `throughput=`. sockperf ping-pong over UDP (its default) with `-m 14`, rate from `[Total Run]` as in the TCP row. qperf `udp_lat`: like tcp_lat, round trips/s = msg_rate / 2 = `loc_recv_msgs / loc_real_time` (check, 3 s run: msg_rate 74,262/s; 111,392 messages received in 3 s = 37,131/s).
note	UDP loss and stalls. thrum counts a udp_rr transaction lost after `--rr-timeout` (50 ms) and reuses its slot, so a loss never stops a flow. netperf and neper never resend: in netperf's UDP_RR a lost request or response stops the exchange until the test timer expires (netperf manual), and with `-b N` the test survives losses until all N + 1 slots are lost; neper's udp_rr state machine has no timeout either (a flow whose datagram is lost waits for the rest of the test) and counts no loss. The "lost transactions" column is each tool's own count: thrum `summary.lost`; netperf LOCAL_SEND_CALLS - LOCAL_RECV_CALLS less the burst + 1 that may legitimately be in flight at the end (so a lower bound); sockperf `# dropped messages` (sequence gaps in its valid window); qperf `loc_send_msgs - loc_recv_msgs` less the one in flight. The "kernel UDP drops" column is the change in this network namespace's UDP InErrors (from /proc/net/snmp; receive-buffer overflows are counted in it) from just before the server starts to just after it exits: the same referee for every tool, neper included. Other UDP traffic in this namespace during a run would be counted too; other namespaces' tests are not. thrum's `lost` also counts responses that come later than `--rr-timeout`, which is not a drop: in a spot check with 8 busy loops on the 2 vCPUs, `udp_rr -F 16 -T 2 -b 16` reported 16 lost against 0 kernel drops (on a quiet machine, 0 and 0).
note	udp_rr aggregate row (udp_rr_agg), not like-for-like by design: each tool runs as many transactions at once as it can express. thrum `-F 16 -T 2 -b 16`: 16 flows, each with 17 transactions in flight (272 in all), on 2 worker threads per end, moving datagrams with sendmmsg/recvmmsg (up to 17 per call). neper `-F 16 -T 2` on both ends: 16 flows on 2 threads, but neper has no burst option, so one transaction in flight per flow (16 in all). netperf runs one flow per process: two `UDP_RR -- -r 1,1 -b 16` processes at once (17 in flight each, 34 in all; this netperf is built with --enable-burst), rate = the sum of their THROUGHPUT. Each talks to its own `netserver -f`: a non-forking netserver serves one test at a time (a second netperf waits for the first to finish), and a forking one ignores SIGCHLD, so the CPU of its per-test children is accounted to no process. The pair of clients and the pair of servers each run under `compare_helper.py par`, whose rusage covers both (plus some 20 ms of Python start-up). The two netperf windows start a few ms apart, so the sum slightly overstates the rate of any one instant. For scale, spot checks of thrum in the peers' shapes, right after the run of 2026-11-22 05:52 UTC (3 runs of 5 s each, quiet machine; the row's own shape gave 295,000–302,000 then, matching its table): neper's, `-F 16 -T 2 -b 0` (16 in flight), 188,000–195,000 transactions/s; netperf's, `-F 2 -T 2 -b 16` (34 in flight), 305,000–315,000.
note	udp_stream row: 1472-byte datagrams (what fits a 1500-byte Ethernet MTU; loopback's MTU is 65536, so nothing is fragmented), unpaced senders (thrum's default, iperf3 `-b 0`; netperf and neper do not pace). The rate is datagrams the server received per second, each from the receiver's own figures: thrum `summary.datagrams_received / summary.duration_s` and `throughput_bps` (the server's counts over the window); iperf3 `end.sum_received` of the client's `--json` (the server's report): (`packets` - `lost_packets`) / `seconds` — `packets` is the highest sequence number the server saw, and the result equals `bytes` / 1472 exactly — and `bits_per_second`, loss = `lost_percent`; netperf UDP_STREAM `-m 1472 -f m`, whose THROUGHPUT is netserver's receive rate, datagrams/s = THROUGHPUT x 10^6 / (8 x 1472), loss from LOCAL_SEND_CALLS vs. REMOTE_RECV_CALLS; neper-udp_stream `-B 1472`, `remote_throughput` (bits/s the server read) / (8 x 1472), no loss count. thrum sends and receives up to 32 datagrams per sendmmsg/recvmmsg call, the peers one per call; that is part of what the row measures. An unpaced sender keeps one CPU busy for the whole test, and what the receiver has no room for the kernel drops (loss %), so the rate is the receiver's speed and the CPU per received datagram includes sending the dropped ones.
EOF
} >"$META"

"$PY" "$HELPER" report "$RESULTS" "$CMDS" "$META" "$OUT"
echo "compare.sh: wrote $OUT ($FAILED failed runs)" >&2
# The report is written either way; the status tells automation about failures.
((FAILED == 0)) || exit 1
