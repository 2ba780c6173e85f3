# Process control shared by the bench scripts that start a server and a
# client per run (compare.sh, agg-cost.sh). Sourced, not run. The script
# sets ROOT, PY and HELPER, WORK (its scratch directory), KEEP and FAILED,
# and CUR_SRV/CUR_CLI to the pids of what is running.

stop_pid() { # pid: SIGTERM, then SIGKILL if it has not gone after 5 s
	local pid="$1" i
	[[ -n "$pid" ]] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

# The EXIT trap: stop the client and the server still running, then remove
# the scratch directory unless KEEP or a failed run asks to keep its logs.
bench_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_pid "$CUR_CLI"
	stop_pid "$CUR_SRV"
	wait 2>/dev/null || true
	if ((KEEP || FAILED)) && [[ -d "$WORK" ]]; then
		echo "${0##*/}: per-run logs kept in $WORK" >&2
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}

bench_traps() {
	trap bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

wait_listen() { # pid port...: until the server listens (TCP) or is bound
	# (UDP) on every port, or fail after 10 s
	local pid="$1" port i up
	shift
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || return 1
		up=1
		for port in "$@"; do
			[[ -n "$(ss -Hltun "sport = :$port")" ]] || { up=0; break; }
		done
		((up)) && return 0
		sleep 0.1
	done
	return 1
}

# start_and_run DIR SRV_LIMIT_S CLI_LIMIT_S: the server (the array SRV)
# under compare_helper.py `run`, which takes its rusage into DIR/srv.ru, then
# once it listens on every port of PORTS the client (CLI) likewise into
# DIR/cli.ru, to its end. Each runs under its deadline, which bounds it even
# if this script is SIGKILLed and never reaches its EXIT trap. Sets STATUS
# (ok, client-exit-N, server-not-listening) and leaves the server running
# (CUR_SRV) for stop_server.
start_and_run() {
	local d="$1" rc=0
	STATUS=ok
	"$PY" "$HELPER" run "$d/srv.ru" "$2" -- "${SRV[@]}" \
		>"$d/srv.out" 2>"$d/srv.err" </dev/null &
	CUR_SRV=$!
	if wait_listen "$CUR_SRV" "${PORTS[@]}"; then
		# Background + wait rather than foreground, so that a signal to this
		# script runs the trap at once instead of after the client ends.
		"$PY" "$HELPER" run "$d/cli.ru" "$3" -- "${CLI[@]}" \
			>"$d/cli.out" 2>"$d/cli.err" </dev/null &
		CUR_CLI=$!
		wait "$CUR_CLI" || rc=$?
		CUR_CLI=""
		((rc == 0)) || STATUS="client-exit-$rc"
	else
		STATUS="server-not-listening"
	fi
}

stop_server() {
	stop_pid "$CUR_SRV"
	wait "$CUR_SRV" 2>/dev/null || true
	CUR_SRV=""
}

qjoin() { # shell-quote only the words that need it, for a readable report
	local a out=()
	for a in "$@"; do
		a="${a#"$ROOT/"}" # thrum's and the helper's paths relative to the repository root
		[[ "$a" == "$PY" ]] && a=python3
		if [[ "$a" =~ ^[A-Za-z0-9_./:,=+@%-]+$ ]]; then out+=("$a"); else out+=("$(printf '%q' "$a")"); fi
	done
	echo "${out[*]}"
}
