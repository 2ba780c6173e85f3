#!/usr/bin/env python3
"""Helper for bench/compare.sh: process runner with rusage, result parsers, report.

Kept in Python because bash can neither wait4() for a child's rusage nor do
the arithmetic/parsing comfortably. Only the standard library is used.

Subcommands:
  run OUT_RU DEADLINE_S -- CMD...   run CMD, write "user sys wall" seconds to OUT_RU
  par CMD... [::: CMD...]...        run the commands at once, wait for all of them
  stat                              print busy CPU seconds of the machine, a timestamp
                                    and the kernel's UDP receive-error count
  quiet MAX_WAIT_S THRESHOLD        wait until other load is under THRESHOLD CPUs
  parse TOOL ROW DIR                print the run's metric (tx/s, datagrams/s or bits/s),
                                    Mbit/s, loss and a note, tab-separated ("-" if none)
  report RESULTS CMDS META OUT      write the Markdown report
"""

import json
import os
import re
import signal
import statistics
import sys
import time


# --------------------------------------------------------------------------
# run: fork/exec + wait4 so that CPU time is taken from the kernel's own
# accounting of the whole process (all threads, plus any children it reaped),
# whether the program exits by itself or is stopped with a signal. That works
# the same for every tool, unlike each tool's self-reported CPU figures
# (qperf and iperf3 report system-wide /proc/stat percentages, for instance).
# --------------------------------------------------------------------------
def _spawn(cmd):
    """fork + exec CMD as a child of this process; returns its pid."""
    pid = os.fork()
    if pid == 0:
        # A background job of a non-interactive bash starts with SIGINT
        # ignored, and exec keeps ignored signals ignored: give the tool the
        # default dispositions so that it can be stopped like from a terminal.
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)
        # If this wrapper is SIGKILLed, take the tool down with it
        # (PR_SET_PDEATHSIG survives exec, so taskset's target gets it too).
        try:
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
        try:
            os.execvp(cmd[0], cmd)
        except OSError as e:
            print(f"compare_helper: cannot exec {cmd[0]}: {e}", file=sys.stderr)
            os._exit(127)
    return pid


def _forward_signals(pids):
    """Pass SIGINT/SIGTERM/SIGHUP on to the children; returns the forwarder."""
    def forward(sig, _frame):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)
    return forward


def cmd_run(argv):
    out_ru, deadline = argv[0], float(argv[1])
    assert argv[2] == "--"
    cmd = argv[3:]
    t0 = time.monotonic()
    pid = _spawn(cmd)
    forward = _forward_signals([pid])

    # The deadline is the hard bound on every process the benchmark starts:
    # even if compare.sh itself is SIGKILLed, no tool outlives it by much.
    def on_alarm(_sig, _frame):
        forward(signal.SIGTERM, None)
        signal.signal(signal.SIGALRM, lambda *_: forward(signal.SIGKILL, None))
        signal.alarm(5)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(max(1, int(deadline)))

    while True:
        try:
            _, status, ru = os.wait4(pid, 0)
            break
        except ChildProcessError:
            sys.exit(127)
    wall = time.monotonic() - t0
    signal.alarm(0)
    with open(out_ru, "w") as f:
        f.write(f"{ru.ru_utime:.6f} {ru.ru_stime:.6f} {wall:.6f}\n")
    code = os.waitstatus_to_exitcode(status)
    sys.exit(code if code >= 0 else 128 - code)


# --------------------------------------------------------------------------
# par: several processes measured as one. The aggregate UDP_RR row runs two
# netperf clients against two netservers at once; `run` takes the rusage of
# this process, and wait4() folds in that of every child it reaps, so both
# clients (or both servers) are charged. A forking netserver would not do:
# it ignores SIGCHLD, so its children's CPU is never accounted to anyone.
# --------------------------------------------------------------------------
def cmd_par(argv):
    cmds, cur = [], []
    for a in argv:
        if a == ":::":
            cmds.append(cur)
            cur = []
        else:
            cur.append(a)
    cmds.append(cur)
    assert all(cmds), "par: empty command"
    pids = [_spawn(c) for c in cmds]
    _forward_signals(pids)
    rc = 0
    live = set(pids)
    while live:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        live.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        if code != 0 and rc == 0:
            rc = code if code > 0 else 128 - code
    sys.exit(rc)


# --------------------------------------------------------------------------
# stat / quiet: how busy the machine is apart from the benchmark. This VM is
# shared with builds and tests, and on 2 vCPUs one stray compile halves a
# pinned RR rate, so each run is preceded by a wait for quiet and followed by
# a measurement of the CPU used by everything else during it.
# --------------------------------------------------------------------------
def _cpu_busy_s():
    """Seconds of CPU that were not idle (steal included), summed over CPUs."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest is inside user)
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    return busy / os.sysconf("SC_CLK_TCK")


def _udp_in_errors():
    """The network namespace's UDP InErrors: datagrams the kernel dropped on
    receive (full socket buffer mostly; RcvbufErrors is counted in it too).
    Its change over a run is a loss count that does not depend on the tool,
    and the only one for neper, which counts no loss of its own. Other
    network namespaces (another job's tests) have counters of their own."""
    with open("/proc/net/snmp") as f:
        udp = [line.split() for line in f if line.startswith("Udp:")]
    return int(udp[1][udp[0].index("InErrors")])


def cmd_stat(_argv):
    print(f"{_cpu_busy_s():.4f} {time.monotonic():.4f} {_udp_in_errors()}")


def cmd_quiet(argv):
    max_wait, thresh = float(argv[0]), float(argv[1])
    t_end = time.monotonic() + max_wait
    while True:
        b0, t0 = _cpu_busy_s(), time.monotonic()
        time.sleep(0.5)
        load = (_cpu_busy_s() - b0) / (time.monotonic() - t0)
        if load < thresh or time.monotonic() >= t_end:
            print(f"{load:.2f}")
            return


# --------------------------------------------------------------------------
# parse: one number per run, always "round trips per second" for the RR rows,
# "bits per second received" for the TCP stream row and "datagrams per second
# received" for the UDP stream row, plus (UDP rows) the received Mbit/s, what
# the tool says was lost, and a short note for the raw-runs list.
# --------------------------------------------------------------------------

# What each row measures. kind: rr (transactions/s), stream (TCP bits/s),
# udp_rr (transactions/s, lost transactions), udp_stream (datagrams/s,
# Mbit/s, loss %). The constants below must match what compare.sh passes.
ROWS = {
    "rr": ("rr", "tcp_rr, 1 flow, 1-byte request/response, unpinned"),
    "rr_pinned": ("rr", "tcp_rr, 1 flow, 1-byte request/response, client and server "
                        "pinned to CPU 0"),
    "rr_agg": ("rr", "tcp_rr aggregate, 16 flows on 2 threads, 1-byte request/response, "
                     "unpinned (thrum: --driver auto, which runs io_uring here; thrum_uring "
                     "and thrum_epoll: --driver uring and --driver epoll)"),
    "crr": ("rr", "tcp_crr, 1 flow: connect, 1-byte request/response, close; "
                  "connections/s, unpinned (thrum and netperf close gracefully; "
                  "thrum_rst: thrum --close rst, and neper reset)"),
    "crr_agg": ("rr", "tcp_crr aggregate, 16 flows on 2 threads; connections/s, unpinned "
                      "(thrum closes gracefully; thrum_rst: thrum --close rst, and neper "
                      "reset)"),
    "cc": ("rr", "tcp_cc, 1 flow: connect and close, no request or response; "
                 "connections/s, unpinned (thrum and netperf close gracefully; "
                 "thrum_rst: thrum --close rst)"),
    "scale": ("rr", "tcp_rr, 10,000 flows on 2 threads, 1-byte request/response (thrum "
                    "only): set-up time and memory"),
    "stream": ("stream", "tcp_stream, 1 flow, client to server"),
    "stream_split": ("stream", "tcp_stream, 1 flow, client to server, client pinned to CPU 0 "
                               "and server to CPU 1"),
    "stream_pinned": ("stream", "tcp_stream, 1 flow, client to server, client and server "
                                "pinned to CPU 0"),
    "stream_16k": ("stream", "tcp_stream, 1 flow, client to server, at netperf's default "
                             "sizes (16 KiB sends, default receives), unpinned"),
    "stream_default": ("stream", "tcp_stream, 1 flow, client to server, every tool at its "
                                 "own default sizes, unpinned"),
    "maerts": ("stream", "tcp_maerts, 1 flow, server to client (netperf TCP_MAERTS, "
                         "iperf3 -R), unpinned"),
    "bidir": ("stream", "tcp_bidir, 1 flow, both directions at once (iperf3 --bidir), "
                        "unpinned; the sum of the two directions"),
    "stream_f2": ("stream", "tcp_stream, 2 flows on 2 threads (iperf3 -P 2), client to "
                            "server, unpinned; the sum of the flows"),
    "stream_f8": ("stream", "tcp_stream, 8 flows on 2 threads (iperf3 -P 8), client to "
                            "server, unpinned; the sum of the flows"),
    "udp_rr": ("udp_rr", "udp_rr, 1 flow, 1-byte request/response, unpinned"),
    "udp_rr_pinned": ("udp_rr", "udp_rr, 1 flow, 1-byte request/response, client and "
                                "server pinned to CPU 0"),
    "udp_rr_agg": ("udp_rr", "udp_rr aggregate, 16 flows on 2 threads (thrum, neper) or "
                             "2 processes (netperf), burst 16, 1-byte request/response, "
                             "unpinned (thrum: --driver auto, which runs io_uring here; "
                             "thrum_uring and thrum_epoll: --driver uring and --driver epoll)"),
    "udp_stream": ("udp_stream", "udp_stream, 1 flow, 1472-byte datagrams, unpaced, "
                                 "client to server"),
}
# A peer compared with a thrum variant instead of plain thrum: neper's
# tcp_crr resets its connections, as thrum does with --close rst.
LIKE = {("crr", "neper"): "thrum_rst", ("crr_agg", "neper"): "thrum_rst"}
UDP_DGRAM = 1472          # udp_stream datagram size (-m / -l / -B)
AGG_BURST = 16            # udp_rr_agg: -b, so burst + 1 transactions in flight
AGG_NETPERF_PROCS = 2     # udp_rr_agg: parallel netperf processes


def _read(d, name):
    p = os.path.join(d, name)
    return open(p, errors="replace").read() if os.path.exists(p) else ""


def _kv(text):
    """neper prints key=value lines."""
    out = {}
    for line in text.splitlines():
        if "=" in line:
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def _qperf_kv(text):
    kv = {}
    for line in text.splitlines():
        m = re.match(r"\s*(\w+)\s*=\s*([\d.]+)\s*(\S*)", line)
        if m:
            kv[m.group(1)] = (float(m.group(2)), m.group(3))
    return kv


def _csv_lines(text):
    """netperf with -P 0 and an -o selector: one CSV line per netperf process."""
    return [[float(x) for x in line.split(",")]
            for line in text.strip().splitlines() if line.strip()]


def _thrum_warnings(s):
    w = s.get("warnings") or []
    return f"; {len(w)} warning(s): {' / '.join(map(str, w))}" if w else ""


def parse_tcp(tool, row, cli):
    stream = ROWS[row][0] == "stream"
    if tool == "floor":
        kv = _kv(cli)
        return float(kv["throughput_bps"] if stream else kv["transactions_per_s"])
    if tool == "thrum":
        s = json.loads(cli)["summary"]
        return float(s["throughput_bps"] if stream else s["transactions_per_s"])
    if tool == "netperf" and row == "cc":
        # TCP_CC takes no -o: with -P 0 its result line is the socket
        # sizes, request and response sizes, elapsed time and the rate.
        line = next(ln for ln in cli.splitlines() if len(ln.split()) == 6)
        return float(line.split()[5])
    if tool == "netperf":
        # -P 0 plus an -o selector leaves exactly one CSV value on stdout:
        # THROUGHPUT, in trans/s for TCP_RR and in 10^6 bits/s (-f m) for
        # TCP_STREAM.
        v = float(cli.strip().splitlines()[-1].split(",")[0])
        return v * 1e6 if stream else v
    if tool == "neper":
        kv = _kv(cli)
        if stream:
            # The client only writes; remote_throughput is what the server
            # read, in bit/s, which is what the other stream tools report.
            return float(kv["remote_throughput"])
        return float(kv["throughput"])
    if tool == "sockperf":
        return _sockperf_rate(cli)
    if tool == "qperf":
        return _qperf_rate(_qperf_kv(cli))
    if tool == "iperf3":
        end = json.loads(cli)["end"]
        bps = float(end["sum_received"]["bits_per_second"])
        if row == "bidir":
            # --bidir: sum_received is the server's reads of the client's
            # stream, sum_received_bidir_reverse the client's of the server's.
            bps += float(end["sum_received_bidir_reverse"]["bits_per_second"])
        return bps
    raise SystemExit(f"unknown tool {tool}")


def _sockperf_rate(cli):
    # Use the message count rather than converting its latency figure:
    # in ping-pong mode every received message closes one round trip.
    # "[Total Run]" covers the whole -t window, like the other tools'
    # counts; "[Valid Duration]" would drop its first 400 ms and last 50 ms.
    m = re.search(r"\[Total Run\] RunTime=([\d.]+) sec;.*SentMessages=(\d+); "
                  r"ReceivedMessages=(\d+)", cli)
    return int(m.group(3)) / float(m.group(1))


def _qperf_rate(kv):
    # qperf's "latency" is half the round trip, and its msg_rate counts
    # messages in both directions; the client's received-message count
    # over the test time is the round-trip rate directly.
    msgs = kv["loc_recv_msgs"][0]
    t, unit = kv["loc_real_time"]
    assert unit == "ns", unit  # -uu fixes the unit
    return msgs / (t / 1e9)


def parse_udp_rr(tool, row, cli):
    """(transactions/s, None, lost transactions or None, note)."""
    if tool == "thrum":
        s = json.loads(cli)["summary"]
        return (float(s["transactions_per_s"]), None, int(s["lost"]),
                f"lost {s['lost']}{_thrum_warnings(s)}")
    if tool == "floor":
        kv = _kv(cli)
        return (float(kv["transactions_per_s"]), None, int(kv["lost"]),
                f"lost {kv['lost']}")
    if tool == "netperf":
        # -o THROUGHPUT,LOCAL_SEND_CALLS,LOCAL_RECV_CALLS. netperf never
        # resends: a lost request or response leaves its slot empty for the
        # rest of the test, so what was sent but never answered is what was
        # in flight at the end (burst + 1 at most) plus what was lost. More
        # than burst + 1 outstanding proves a loss; a process whose every
        # slot was lost stalls and reports (nearly) 0 transactions/s.
        burst = AGG_BURST if row == "udp_rr_agg" else 0
        procs = AGG_NETPERF_PROCS if row == "udp_rr_agg" else 1
        lines = _csv_lines(cli)
        if len(lines) != procs:
            raise ValueError(f"{len(lines)} netperf result lines, expected {procs}")
        rates = [l[0] for l in lines]
        out = [int(l[1] - l[2]) for l in lines]
        lost = sum(max(0, o - (burst + 1)) for o in out)
        note = "send-recv " + ", ".join(map(str, out))
        if procs > 1:
            note = " + ".join(f"{r:,.0f}" for r in rates) + " tx/s; " + note
        if min(rates) < 0.01 * max(rates):
            note += "; STALLED"
        return sum(rates), None, lost, note
    if tool == "neper":
        # neper counts no loss; a flow whose datagram is lost just stops.
        return float(_kv(cli)["throughput"]), None, None, None
    if tool == "sockperf":
        m = re.search(r"# dropped messages = (\d+)", cli)
        dropped = int(m.group(1)) if m else None
        return (_sockperf_rate(cli), None, dropped,
                f"dropped {dropped}" if m else None)
    if tool == "qperf":
        # One message outstanding at most at the end of a ping-pong.
        kv = _qperf_kv(cli)
        out = int(kv["loc_send_msgs"][0] - kv["loc_recv_msgs"][0])
        return _qperf_rate(kv), None, max(0, out - 1), f"send-recv {out}"
    raise SystemExit(f"unknown tool {tool} for {row}")


def parse_udp_stream(tool, cli):
    """(datagrams/s received, Mbit/s received, loss % or None, note)."""
    if tool == "thrum":
        # The server's counts over the measured window: distinct datagrams
        # received, and gaps in the sequence numbers not filled late.
        s = json.loads(cli)["summary"]
        got, lost = s["datagrams_received"], s["lost"]
        return (got / s["duration_s"], s["throughput_bps"] / 1e6,
                100.0 * lost / (got + lost) if got + lost else 0.0,
                f"sent {s['datagrams_sent']:,}, lost {lost:,}{_thrum_warnings(s)}")
    if tool == "iperf3":
        # The client's --json carries the server's figures in sum_received:
        # packets is the highest sequence number the server saw (what the
        # client had sent by then), lost_packets the gaps, seconds the
        # server's own test time.
        r = json.loads(cli)["end"]["sum_received"]
        got = r["packets"] - r["lost_packets"]
        return (got / r["seconds"], r["bits_per_second"] / 1e6, float(r["lost_percent"]),
                f"sent {r['packets']:,}, lost {r['lost_packets']:,}")
    if tool == "netperf":
        # -f m -o THROUGHPUT,LOCAL_SEND_CALLS,REMOTE_RECV_CALLS. A UDP_STREAM's
        # THROUGHPUT is netserver's receive rate (the send rate is
        # LOCAL_SEND_THROUGHPUT); each receive is one whole datagram.
        (mbps, sent, got), = _csv_lines(cli)
        return (mbps * 1e6 / (8 * UDP_DGRAM), mbps,
                100.0 * (sent - got) / sent if sent else 0.0,
                f"send calls {int(sent):,}, recv calls {int(got):,}")
    if tool == "neper":
        # remote_throughput: bits/s the server read, one datagram per read
        # (-B 1472). neper counts no loss.
        bps = float(_kv(cli)["remote_throughput"])
        return bps / (8 * UDP_DGRAM), bps / 1e6, None, None
    raise SystemExit(f"unknown tool {tool} for udp_stream")


def parse(tool, row, d):
    cli = _read(d, "cli.out")
    kind = ROWS[row][0]
    if tool in ("thrum_uring", "thrum_epoll", "thrum_rst"):
        tool = "thrum"
    if row == "scale":
        # The figures of this row are set-up time and memory; the rate is
        # reported for completeness.
        s = json.loads(cli)["summary"]
        rss = [s[e]["rusage"]["max_rss_kb"] / 1024 for e in ("local", "remote")]
        return (float(s["transactions_per_s"]), None, None,
                f"setup {s['setup_s']:.3f} s, RSS client {rss[0]:.1f} MB + server "
                f"{rss[1]:.1f} MB{_thrum_warnings(s)}")
    if kind == "udp_rr":
        return parse_udp_rr(tool, row, cli)
    if kind == "udp_stream":
        return parse_udp_stream(tool, cli)
    return parse_tcp(tool, row, cli), None, None, None


def cmd_parse(argv):
    tool, row, d = argv
    try:
        v, mbps, loss, note = parse(tool, row, d)
    except Exception as e:  # noqa: BLE001 - any parse failure means a failed run
        print(f"parse {tool}/{row}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    if not v > 0:
        print(f"parse {tool}/{row}: non-positive value {v}", file=sys.stderr)
        sys.exit(1)
    # "-" for an absent field: bash's read would merge adjacent empty fields.
    fields = [f"{v:.6f}", "-" if mbps is None else f"{mbps:.3f}",
              "-" if loss is None else (f"{loss:.4f}" if isinstance(loss, float) else str(loss)),
              (note or "-").replace("\t", " ")]
    print("\t".join(fields))


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------
def _fmt_rate(v, kind):
    return f"{v / 1e9:.2f}" if kind == "stream" else f"{v:,.0f}"


def _raw_note(kind, r):
    """The bracketed loss counts after a UDP run in the raw-runs list, or
    the scale row's set-up time and memory."""
    if r[0] == "scale" and r[11] != "-":
        return f" [{r[11]}]"
    if not kind.startswith("udp"):
        return ""
    parts = ([] if r[11] == "-" else [r[11]]) + [f"kernel drops {int(r[12]):,}"]
    return f" [{'; '.join(parts)}]"


def _netperf_burst_summary(ok_runs):
    """One sentence on whether netperf's burst UDP_RR lost or stalled."""
    n = len(ok_runs)
    stalled = sum(1 for r in ok_runs if "STALLED" in r[11])
    lossy = sum(1 for r in ok_runs if r[10] != "-" and int(r[10]) > 0)
    outs = [int(x) for r in ok_runs
            for x in re.findall(r"send-recv ([\d, ]+)", r[11])[0].split(",")]
    return (f"netperf burst check: {stalled} of {n} runs had a process stalled "
            f"(under 1% of the other's rate), {lossy} showed a loss "
            f"(more than burst + 1 = {AGG_BURST + 1} requests unanswered); "
            f"unanswered at the end per process: {min(outs)}–{max(outs)}.")


def _work(v, kind, dur):
    """The work of one run's window, in the unit CPU time is divided by:
    GB for the TCP stream, millions of transactions or datagrams otherwise."""
    return v * dur / 8 / 1e9 if kind == "stream" else v * dur / 1e6


# --------------------------------------------------------------------------
# targets: issue 7's targets, each read from this run's medians, so that the
# verdicts are regenerated with the tables and never edited by hand.
# --------------------------------------------------------------------------
RR_PEERS = ("netperf", "neper", "sockperf", "qperf")


def _values(runs, row, dur, tool, what):
    """The tool's ok runs of `row`: their rates, or their CPU per unit of work
    when `what` is "cpu"."""
    kind = ROWS[row][0]
    ok = [r for r in runs if r[0] == row and r[1] == tool and r[3] == "ok"]
    if what == "rate":
        return [float(r[4]) for r in ok]
    return [(float(r[5]) + float(r[6])) / _work(float(r[4]), kind, dur) for r in ok]


def _medians(runs, row, dur):
    """tool -> (median rate, median CPU per unit of work) over ok runs."""
    out = {}
    for t in {r[1] for r in runs if r[0] == row}:
        rates = _values(runs, row, dur, t, "rate")
        if rates:
            out[t] = (statistics.median(rates),
                      statistics.median(_values(runs, row, dur, t, "cpu")))
    return out


def _spread(runs, row, dur, tool, what):
    """(min, max) of `_values`, or None when the tool has no ok run."""
    vals = _values(runs, row, dur, tool, what)
    return (min(vals), max(vals)) if vals else None


# The docs/performance.md section with the profile behind a miss, per row.
PROFILE_DOC = {
    "rr": "Run-to-run spread", "udp_rr": "Run-to-run spread",
    "rr_pinned": "Pinned single-flow RR", "udp_rr_pinned": "Pinned single-flow RR",
    "udp_rr_agg": "Kernel profile: udp_rr aggregate",
    "crr": "tcp_crr: syscalls per connection", "crr_agg": "tcp_crr: syscalls per connection",
    "stream": "tcp_stream on loopback", "stream_split": "tcp_stream on loopback",
    "stream_pinned": "Issue 21: the bulk path", "stream_16k": "Issue 21: the bulk path",
    "stream_default": "Round 3: single-flow tcp_stream",
    "maerts": "Issue 21: the bulk path", "bidir": "Issue 21: the bulk path",
    "stream_f2": "Issue 21: the bulk path", "stream_f8": "Issue 21: the bulk path",
    "udp_stream": "udp_stream 1472 B",
}


def _fmt(v, row):
    return _fmt_rate(v, ROWS[row][0])


def _unit(row, what):
    """The unit of a target row's figures."""
    kind = ROWS[row][0]
    if what == "cpu":
        return {"stream": "CPU-s per GB", "udp_stream": "CPU-s per M datagrams"}.get(
            kind, "CPU-s per M transactions")
    return {"stream": "Gbit/s", "udp_stream": "datagrams/s received"}.get(
        kind, "transactions/s")


def _against(runs, dur, row, peers, need, what="rate", context=(), me="thrum"):
    """Verdict on thrum (or its variant `me`) against `peers`: (figures,
    ratios, verdict), or None when `me` did not run in `row`. `context`
    tools are shown, not judged. A miss says by how much, whether the runs
    of thrum and of the peer it missed against overlap (a miss inside the
    row's spread) and names the docs/performance.md section with its
    profile."""
    m = _medians(runs, row, dur)
    if me not in m:
        return None
    m = dict(m, thrum=m[me])
    have = [p for p in peers if p in m]
    if not have:
        return ("no peer ran", "—", "n/a")
    i = 0 if what == "rate" else 1
    if what == "rate":
        ratios = {p: m["thrum"][0] / m[p][0] for p in have}
    else:  # CPU: the peer's cost over thrum's, so above 1 is better too
        ratios = {p: m[p][1] / m["thrum"][1] for p in have}

    def fig(t):
        return _fmt(m[t][0], row) if i == 0 else f"{m[t][1]:.2f}"
    shown = [t for t in context if t in m]
    figs = "; ".join(f"{me if t == 'thrum' else t} {fig(t)}"
                     for t in ("thrum", *have, *shown))
    figs = f"{figs} ({_unit(row, what)})"
    worst = min(ratios.values())
    rat = ", ".join(f"{ratios[p]:.2f} ({p})" for p in have)
    if worst >= need:
        return (figs, rat, "yes")
    verdict = f"missed by {100 * (need - worst) / need:.1f} %"
    p = min(have, key=lambda t: ratios[t])
    a, b = _spread(runs, row, dur, me, what), _spread(runs, row, dur, p, what)
    if a and b:
        f = (lambda v: _fmt(v, row)) if what == "rate" else (lambda v: f"{v:.2f}")
        inside = a[1] >= b[0] and b[1] >= a[0]
        verdict += (f"; {'inside' if inside else 'outside'} the spread "
                    f"({me} {f(a[0])}–{f(a[1])}, {p} {f(b[0])}–{f(b[1])})")
    if what == "cpu" and "floor" in m and p in m:
        verdict += f"; the floor's ratio is {m[p][1] / m['floor'][1]:.2f}"
    if row in PROFILE_DOC:
        verdict += f"; profile: docs/performance.md, “{PROFILE_DOC[row]}”"
    return (figs, rat, verdict)


def _write_targets(w, title, rows):
    """One targets table: (target, figures, ratios, verdict) rows."""
    if not rows:
        return
    w("")
    w(f"## {title}, read from this run")
    w("")
    w("Computed by `compare_helper.py report` from the medians above (ratios are "
      "thrum/peer for rates and peer/thrum for CPU, so above 1 favours thrum; "
      "the verdict takes the worst ratio of the row). A miss smaller than the "
      "row's min–max spread is within run-to-run noise; docs/performance.md has "
      "the profiles behind each miss.")
    w("")
    w("| target | medians | ratio | met? |")
    w("|---|---|---|---|")
    for t, figs, rat, v in rows:
        w(f"| {t} | {figs} | {rat} | {v} |")


def _targets(w, runs, meta, dur):
    rows = []  # (target, figures, ratios, verdict)

    def against(row, peers, need, what="rate", context=(), me="thrum"):
        return _against(runs, dur, row, peers, need, what, context, me)

    def add(target, res):
        if res is not None:
            rows.append((target, *res))

    for row, name in (("rr", "tcp_rr 1 flow, unpinned"), ("rr_pinned", "tcp_rr 1 flow, pinned"),
                      ("udp_rr", "udp_rr 1 flow, unpinned"),
                      ("udp_rr_pinned", "udp_rr 1 flow, pinned")):
        add(f"{name}: ≥ 1.0× every peer", against(row, RR_PEERS, 1.0))
        add(f"{name}: ≥ 0.95× the floor", against(row, ("floor",), 0.95))
    for row, name in (("rr", "unpinned"), ("rr_pinned", "pinned")):
        add(f"CPU per transaction, tcp_rr 1 flow {name}: ≤ 0.9× netperf (ratio netperf/thrum ≥ 1.11)",
            against(row, ("netperf",), 1 / 0.9, "cpu", context=("floor",)))
    add("udp_rr aggregate: ≥ 1.1× neper and netperf", against("udp_rr_agg", ("neper", "netperf"), 1.1))
    add("tcp_crr 1 flow, graceful close: ≥ 1.0× netperf", against("crr", ("netperf",), 1.0))
    add("tcp_crr 1 flow, reset close: ≥ 1.0× neper",
        against("crr", ("neper",), 1.0, me="thrum_rst"))
    add("tcp_crr 16 flows, reset close: ≥ 1.0× neper",
        against("crr_agg", ("neper",), 1.0, me="thrum_rst"))
    # The split-CPU row, when it ran: unpinned, loopback tcp_stream swings
    # ±25 % with where the scheduler puts the two ends (docs/performance.md).
    srow = "stream_split" if _medians(runs, "stream_split", dur) else "stream"
    where = ", client on CPU 0, server on CPU 1" if srow == "stream_split" else ", unpinned"
    add(f"tcp_stream{where}: ≥ 1.0× iperf3, netperf, neper",
        against(srow, ("iperf3", "netperf", "neper"), 1.0))
    add(f"tcp_stream{where}: CPU per GB ≤ every peer's (ratio peer/thrum ≥ 1)",
        against(srow, ("iperf3", "netperf", "neper"), 1.0, "cpu"))
    for row, name in (("stream_f2", "-F 2 -T 2"), ("stream_f8", "-F 8 -T 2")):
        add(f"tcp_stream {name}: ≥ 1.0× neper and iperf3 -P",
            against(row, ("neper", "iperf3"), 1.0))
    add("udp_stream 1472 B: ≥ 1.0× iperf3", against("udp_stream", ("iperf3",), 1.0))
    for row, name in (("rr_agg", "tcp_rr 16 flows"), ("udp_rr_agg", "udp_rr aggregate")):
        # thrum_epoll, not thrum: plain thrum (--driver auto) runs io_uring
        # in these rows.
        m = _medians(runs, row, dur)
        if "thrum_epoll" in m and "thrum_uring" in m:
            u, e = m["thrum_uring"], m["thrum_epoll"]
            r, c = u[0] / e[0], e[1] / u[1]
            rows.append((f"io_uring vs epoll, {name}: ≥ 1.15× at equal CPU",
                         f"uring {_fmt(u[0], row)}; epoll {_fmt(e[0], row)}; "
                         f"CPU per M: {u[1]:.2f} vs {e[1]:.2f}",
                         f"{r:.2f} rate, {c:.2f} CPU (epoll/uring)",
                         "yes" if r >= 1.15 and c >= 0.95 else
                         f"missed by {100 * (1.15 - r) / 1.15:.1f} %; kernel profile: protocol "
                         "work is about 78 % of CPU under either driver (docs/performance.md, "
                         "“Kernel profile: why io_uring is not 1.15× epoll here”)"
                         if r < 1.15 else
                         "rate yes, CPU higher"))
    sc = [r for r in runs if r[0] == "scale" and r[1] == "thrum"]
    if sc:
        ok = [r for r in sc if r[3] == "ok"]
        setups, rss = [], []
        for r in ok:
            mo = re.search(r"setup ([0-9.]+) s, RSS client ([0-9.]+) MB \+ server ([0-9.]+) MB", r[11])
            if mo:
                setups.append(float(mo.group(1)))
                rss.append(float(mo.group(2)) + float(mo.group(3)))
        good = len(ok) == len(sc) and setups and max(setups) <= 5 and max(rss) <= 256
        rows.append(("10,000 tcp_rr flows: runs, set-up ≤ 5 s, client + server RSS ≤ 256 MB",
                     f"{len(ok)}/{len(sc)} runs; set-up {min(setups, default=0):.3f}–"
                     f"{max(setups, default=0):.3f} s; RSS ≤ {max(rss, default=0):.1f} MB",
                     "—", "yes" if good else "missed"))
    _write_targets(w, "Issue 7's targets", rows)
    _write_targets(w, "Issue 21's targets", _targets_issue21(runs, dur))


STREAM_PEERS = ("netperf", "iperf3", "neper")


def _targets_issue21(runs, dur):
    """Issue 21's table (performance, second round), a line per row of it
    that this run can answer, and a line for each it cannot."""
    rows = []

    def add(target, res):
        if res is not None:
            rows.append((target, *res))

    for row, name in (("stream", "unpinned, 64 KiB sends"),
                      ("stream_split", "split (client on CPU 0, server on CPU 1), 64 KiB sends"),
                      ("stream_pinned", "pinned (both on CPU 0), 64 KiB sends"),
                      ("stream_16k", "unpinned, netperf's default sizes (16 KiB sends)"),
                      ("stream_default", "unpinned, every tool at its own defaults")):
        add(f"tcp_stream 1 flow, {name}: ≥ 1.0× the best of netperf, iperf3, neper",
            _against(runs, dur, row, STREAM_PEERS, 1.0, context=("floor",)))
        add(f"tcp_stream 1 flow, {name}: CPU per GB ≤ every peer's (ratio peer/thrum ≥ 1)",
            _against(runs, dur, row, STREAM_PEERS, 1.0, "cpu", context=("floor",)))
    add("tcp_maerts 1 flow: ≥ 1.0× netperf TCP_MAERTS",
        _against(runs, dur, "maerts", ("netperf",), 1.0, context=("iperf3",)))
    add("tcp_bidir 1 flow: ≥ 1.0× iperf3 --bidir",
        _against(runs, dur, "bidir", ("iperf3",), 1.0))
    for row, name in (("stream_f2", "-F 2 -T 2"), ("stream_f8", "-F 8 -T 2")):
        add(f"tcp_stream {name}: ≥ 1.0× neper and iperf3 -P",
            _against(runs, dur, row, ("neper", "iperf3"), 1.0))
    # "With the better driver": thrum's own choice (--driver auto keeps
    # tcp_crr off io_uring; thrum_uring is in the table beside it).
    add("tcp_crr 1 flow, graceful close: ≥ 1.0× netperf TCP_CRR",
        _against(runs, dur, "crr", ("netperf",), 1.0))
    add("tcp_crr 1 flow, reset close: ≥ 1.0× neper tcp_crr",
        _against(runs, dur, "crr", ("neper",), 1.0, me="thrum_rst"))
    add("tcp_crr 16 flows, reset close: ≥ 1.0× neper tcp_crr",
        _against(runs, dur, "crr_agg", ("neper",), 1.0, me="thrum_rst"))
    # Item 3: --driver auto should run the faster driver where it matters.
    for row, name in (("rr_agg", "tcp_rr 16 flows"), ("udp_rr_agg", "udp_rr aggregate")):
        add(f"{name}: --driver auto ≥ 1.0× the better of --driver uring and --driver epoll",
            _against(runs, dur, row, ("thrum_uring", "thrum_epoll"), 1.0))
    if rows:
        rows.append(("100,000 flows: runs, set-up ≤ 10 s, RSS ≤ 1 GB per end",
                     "not measured by this script (its scale row has 10,000 flows)",
                     "—", "not measured"))
        rows.append(("agg CPU per transaction at 16 streams ≤ netperf's aggregate",
                     "measured by bench/agg-cost.sh, not this script", "—", "not measured"))
    return rows

def cmd_report(argv):
    results_path, cmds_path, meta_path, out_path = argv
    # META: "key<TAB>value" lines written by compare.sh; "note" may repeat.
    meta = {"notes": [], "absent": []}
    for line in open(meta_path):
        k, _, v = line.rstrip("\n").partition("\t")
        if k == "note":
            meta["notes"].append(v)
        elif k == "absent":
            meta["absent"].append(v)
        else:
            meta[k] = v
    meta["rows"] = meta["rows"].split()
    # row, tool, run, status, value, cli_cpu, srv_cpu, cli_wall, other_load,
    # mbit/s, loss, note ("-" when absent), kernel UDP receive drops
    runs = []
    for line in open(results_path):
        f = line.rstrip("\n").split("\t")
        if len(f) == 13:
            runs.append(f)
    cmds = {}
    for line in open(cmds_path):
        row, tool, srv, cli = line.rstrip("\n").split("\t")
        cmds.setdefault((row, tool), (srv, cli))

    L = []
    w = L.append
    dur = float(meta["duration"])
    w("# thrum vs. peers: side-by-side benchmark")
    w("")
    w(f"Produced by `bench/compare.sh` on {meta['date']}. Regenerate with "
      f"`{meta['invocation']}`.")
    w("")
    w("## Machine")
    w("")
    w(f"- CPUs: {meta['nproc']} (`nproc`), model: {meta['cpu_model']}")
    w(f"- Kernel: {meta['kernel']}")
    w(f"- Load average before / after: {meta['load_before']} / {meta['load_after']}")
    w(f"- Tools: {meta['versions']}")
    w("")
    w("## Method")
    w("")
    w(f"- {meta['runs']} runs of {meta['duration']} s per tool and row. Runs alternate "
      "between tools (thrum, peer 1, peer 2, ..., thrum, peer 1, ...), so slow drift "
      "of the machine hits every tool alike.")
    w("- Every run starts a fresh server process on its own loopback port and stops "
      "it afterwards; all traffic is to 127.0.0.1. thrum is run as a separate "
      "server process too (not its embedded in-process server), so both ends are "
      "separate processes for every tool.")
    w("- CPU is user+system seconds of the client process plus the server process, "
      "each taken from `wait4()` (kernel rusage over the process's whole life, "
      "all threads). It is divided by the work of the test window (rate x "
      f"{meta['duration']} s); no tool sends traffic outside that window here, "
      "so process start-up and connection set-up are the only extra CPU "
      "charged, a few ms per run.")
    w("- RR rate is completed round trips (transactions) per second as seen by the "
      "client. TCP stream rate is bits per second received by the server. UDP "
      "stream rate is datagrams per second received by the server (CPU is per "
      "million of them), with the same figure in Mbit/s of UDP payload; an "
      "unpaced UDP sender outruns its receiver, so what was sent is not a result.")
    w("- UDP loss is what each tool reports itself (see the notes for how); "
      "n/a where the tool counts none.")
    w("- Figures: median over runs, min–max range, thrum/peer = median(thrum) / "
      "median(peer) (above 1 means thrum is faster), CPU per unit = median over runs.")
    w("- Other load: CPUs busy (from /proc/stat, steal included) during a run "
      "beyond the two measured processes, from the server's start to its exit: "
      "builds or tests running beside the benchmark, kernel threads, the "
      "helper's own start-up. Before each run the script waits up to "
      f"{meta['quiet_wait']} s for the machine to be under {meta['quiet_thresh']} "
      "busy CPUs. Medians from runs with high other load deserve suspicion, "
      "most of all in the pinned row, where every CPU-0 cycle taken by "
      "something else is lost to the test.")
    if meta["absent"]:
        w(f"- Absent, so skipped: {', '.join(meta['absent'])}.")
    else:
        w("- No peer was absent: all of netperf, neper, sockperf, qperf and iperf3 ran.")
    w("")
    w("## Results")
    for row in meta["rows"]:
        kind, title = ROWS[row]
        rr = [r for r in runs if r[0] == row]
        if not rr:
            continue
        tools = []
        for r in rr:
            if r[1] not in tools:
                tools.append(r[1])
        ok = {t: [r for r in rr if r[1] == t and r[3] == "ok"] for t in tools}
        med = {t: statistics.median(float(r[4]) for r in ok[t]) if ok[t] else None
               for t in tools}
        w("")
        w(f"### {title}")
        w("")
        unit = {"stream": "Gbit/s", "udp_stream": "datagrams/s received"}.get(
            kind, "transactions/s")
        cpu_unit = {"stream": "CPU s per GB", "udp_stream": "CPU s per M datagrams"}.get(
            kind, "CPU s per M transactions")
        # UDP rows carry extra columns between the rate and the CPU figures.
        extra = {"udp_rr": ["lost transactions, all runs", "kernel UDP drops, all runs"],
                 "udp_stream": ["median Mbit/s received", "median loss %",
                                "median kernel UDP drops per run"]}.get(kind, [])
        head = ["tool", f"median {unit}", "min–max", "thrum/peer", *extra,
                f"{cpu_unit} (client + server)", "CPU thrum/peer", "other load, CPUs",
                "runs ok"]
        # Median CPU per unit of work per tool, for the CPU ratio column.
        cpu_med = {}
        for t in tools:
            if ok[t]:
                cpu_med[t] = statistics.median(
                    (float(r[5]) + float(r[6])) / _work(float(r[4]), kind, dur) for r in ok[t])
        w("| " + " | ".join(head) + " |")
        w("|---|" + "---:|" * (len(head) - 1))
        for t in tools:
            n_all = sum(1 for r in rr if r[1] == t)
            if not ok[t]:
                w(f"| {t} | failed |" + " |" * (len(head) - 3) + f" 0/{n_all} |")
                continue
            vals = [float(r[4]) for r in ok[t]]
            cpu_per = []
            cli_per, srv_per = [], []
            for r in ok[t]:
                v, c, sv = float(r[4]), float(r[5]), float(r[6])
                # Every tool sends traffic only during its -l/-t window (thrum
                # runs with --warmup 0s for that reason), so rate x duration is
                # all the work the two processes did. Client wall time would
                # not do: sockperf idles for seconds around its test.
                work = _work(v, kind, dur)
                cpu_per.append((c + sv) / work)
                cli_per.append(c / work)
                srv_per.append(sv / work)
            base = LIKE.get((row, t), "thrum")
            if t in ("thrum", "thrum_rst"):
                ratio = "—"
            elif med.get(base):
                ratio = f"{med[base] / med[t]:.2f}"
            else:
                ratio = "n/a"
            cells = [t, _fmt_rate(med[t], kind),
                     f"{_fmt_rate(min(vals), kind)}–{_fmt_rate(max(vals), kind)}", ratio]
            losses = [r[10] for r in ok[t]]
            kdrops = [int(r[12]) for r in ok[t]]
            if kind == "udp_rr":
                cells.append("n/a" if "-" in losses else f"{sum(int(x) for x in losses):,}")
                cells.append(f"{sum(kdrops):,}")
            elif kind == "udp_stream":
                cells.append(f"{statistics.median(float(r[9]) for r in ok[t]):,.0f}")
                cells.append("n/a" if "-" in losses
                             else f"{statistics.median(float(x) for x in losses):.2f}")
                cells.append(f"{statistics.median(kdrops):,.0f}")
            cpu_ratio = ("—" if t in ("thrum", "thrum_rst") else
                         f"{cpu_med[base] / cpu_med[t]:.2f}" if cpu_med.get(base) else "n/a")
            cells += [f"{statistics.median(cpu_per):.2f} ({statistics.median(cli_per):.2f} + "
                      f"{statistics.median(srv_per):.2f})", cpu_ratio,
                      f"{statistics.median(float(r[8]) for r in ok[t]):.2f}",
                      f"{len(ok[t])}/{n_all}"]
            w("| " + " | ".join(cells) + " |")
        if row == "udp_rr_agg" and ok.get("netperf"):
            w("")
            w(_netperf_burst_summary(ok["netperf"]))
        if row == "scale" and ok.get("thrum"):
            w("")
            w("Set-up (all 10,000 flows connected and accepted) and peak RSS per run: "
              + "; ".join(r[11] for r in ok["thrum"]) + ". Target: set-up ≤ 5 s, "
              "client + server RSS ≤ 256 MB.")
    _targets(w, runs, meta, dur)
    w("")
    w("## Pinned vs. unpinned")
    w("")
    w(f"This is a {meta['nproc']}-vCPU VM. With one flow and strict ping-pong, "
      "the unpinned RR rows (TCP and UDP) are dominated by cross-CPU wake-ups: "
      "client and server usually sit on different vCPUs, each round trip wakes a sleeping task on "
      "the other vCPU (an IPI, which in a VM means a hypervisor exit, and often "
      "a vCPU leaving its idle state), so the rate measures the scheduler and the "
      "hypervisor far more than the tool. Pinning both ends to CPU 0 turns each "
      "wake-up into a local context switch; the rate then reflects the per-"
      "transaction cost of the two processes plus the kernel's loopback path, "
      "which is where the tools differ. None of these rows says much about a real "
      "two-host network; compare tools within a row, not rows with each other.")
    w("")
    w("Expect, on a quiet machine, every tool to land at about the same unpinned "
      "rate, each process busy well under one CPU: the time goes to waking the "
      "other vCPU, not to the tools. Expect too that an unpinned run overlapping "
      "other load is faster, not slower: a busy second vCPU never halts, so "
      "waking it costs no idle exit (compare the raw runs with non-zero other "
      "load). The pinned rows are the ones that rank the tools' cost per "
      "transaction. The aggregate UDP RR row is different again: with many "
      "transactions in flight both vCPUs stay busy, no one waits for a wake-up, "
      "and the rate is bounded by CPU, so it ranks per-datagram cost including "
      "batching (sendmmsg/recvmmsg) and the number of transactions each tool "
      "keeps in flight.")
    w("")
    w("## Comparability notes")
    w("")
    for n in meta["notes"]:
        w(f"- {n}")
    w("")
    w("## Exact commands")
    w("")
    w("Shown for run 1; every run uses the same commands. Servers are started "
      "first, the client once the server's port is listening; the server is then "
      "stopped with SIGTERM (neper and iperf3 `-1` servers exit by themselves). "
      "Each process runs under `bench/compare_helper.py run`, which only "
      "fork/execs it and collects its rusage.")
    for row in meta["rows"]:
        ks = [k for k in cmds if k[0] == row]
        if not ks:
            continue
        w("")
        w(f"{ROWS[row][1]}:")
        w("")
        w("```")
        for k in ks:
            srv, cli = cmds[k]
            w(f"# {k[1]}")
            w(f"server: {srv}")
            w(f"client: {cli}")
        w("```")
    w("")
    w("## Raw runs")
    w("")
    w("Rate per run in order (RR: transactions/s; TCP stream: Gbit/s; UDP "
      "stream: datagrams/s received), with the other load during the run in "
      "parentheses and, for UDP, the tool's own loss counts in brackets "
      "(netperf `send-recv`: requests never answered, in flight at the end or "
      "lost); `x` marks a failed run (see the log printed by compare.sh).")
    w("")
    for row in meta["rows"]:
        rr = [r for r in runs if r[0] == row]
        if not rr:
            continue
        kind = ROWS[row][0]
        tools = []
        for r in rr:
            if r[1] not in tools:
                tools.append(r[1])
        w(f"- {row}:")
        for t in tools:
            vals = [(f"{_fmt_rate(float(r[4]), kind)} ({float(r[8]):.2f})"
                     + _raw_note(kind, r) if r[3] == "ok" else "x")
                    for r in rr if r[1] == t]
            w(f"  - {t}: {', '.join(vals)}")
    w("")
    # Sections measured by other scripts (bench/under-load.sh, ...) follow
    # KEEP_MARK in the report; a new comparison keeps them.
    kept = ""
    try:
        old = open(out_path).read()
        if KEEP_MARK in old:
            kept = old[old.index(KEEP_MARK):]
    except OSError:
        pass
    with open(out_path, "w") as f:
        f.write("\n".join(L))
        if kept:
            f.write("\n" + kept)


KEEP_MARK = "<!-- kept by compare.sh: sections from other bench scripts -->"


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sub, argv = sys.argv[1], sys.argv[2:]
    cmds = {"run": cmd_run, "par": cmd_par, "stat": cmd_stat, "quiet": cmd_quiet,
            "parse": cmd_parse, "report": cmd_report}
    cmds[sub](argv)


if __name__ == "__main__":
    main()
