#!/usr/bin/env python3
"""Helper for bench/compare.sh: process runner with rusage, result parsers, report.

Kept in Python because bash can neither wait4() for a child's rusage nor do
the arithmetic/parsing comfortably. Only the standard library is used.

Subcommands:
  run OUT_RU DEADLINE_S -- CMD...   run CMD, write "user sys wall" seconds to OUT_RU
  stat                              print busy CPU seconds of the machine and a timestamp
  quiet MAX_WAIT_S THRESHOLD        wait until other load is under THRESHOLD CPUs
  parse TOOL ROW DIR                print the run's metric (tx/s or bits/s)
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
def cmd_run(argv):
    out_ru, deadline = argv[0], float(argv[1])
    assert argv[2] == "--"
    cmd = argv[3:]
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        # A background job of a non-interactive bash starts with SIGINT
        # ignored, and exec keeps ignored signals ignored: give the tool the
        # default dispositions so that it can be stopped like from a terminal.
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
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

    def forward(sig, _frame):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)

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


def cmd_stat(_argv):
    print(f"{_cpu_busy_s():.4f} {time.monotonic():.4f}")


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
# parse: one number per run, always "round trips per second" for the RR rows
# and "bits per second received" for the stream row.
# --------------------------------------------------------------------------
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


def parse(tool, row, d):
    cli = _read(d, "cli.out")
    stream = row == "stream"
    if tool == "thrum":
        s = json.loads(cli)["summary"]
        return float(s["throughput_bps"] if stream else s["transactions_per_s"])
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
        # Use the message count rather than converting its latency figure:
        # in ping-pong mode every received message closes one round trip.
        # "[Total Run]" covers the whole -t window, like the other tools'
        # counts; "[Valid Duration]" would drop its first 400 ms and last 50 ms.
        m = re.search(r"\[Total Run\] RunTime=([\d.]+) sec;.*SentMessages=(\d+); "
                      r"ReceivedMessages=(\d+)", cli)
        return int(m.group(3)) / float(m.group(1))
    if tool == "qperf":
        # qperf's "latency" is half the round trip, and its msg_rate counts
        # messages in both directions; the client's received-message count
        # over the test time is the round-trip rate directly.
        kv = {}
        for line in cli.splitlines():
            m = re.match(r"\s*(\w+)\s*=\s*([\d.]+)\s*(\S*)", line)
            if m:
                kv[m.group(1)] = (float(m.group(2)), m.group(3))
        msgs = kv["loc_recv_msgs"][0]
        t, unit = kv["loc_real_time"]
        assert unit == "ns", unit  # -uu fixes the unit
        return msgs / (t / 1e9)
    if tool == "iperf3":
        return float(json.loads(cli)["end"]["sum_received"]["bits_per_second"])
    raise SystemExit(f"unknown tool {tool}")


def cmd_parse(argv):
    tool, row, d = argv
    try:
        v = parse(tool, row, d)
    except Exception as e:  # noqa: BLE001 - any parse failure means a failed run
        print(f"parse {tool}/{row}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    if not v > 0:
        print(f"parse {tool}/{row}: non-positive value {v}", file=sys.stderr)
        sys.exit(1)
    print(f"{v:.6f}")


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------
ROW_TITLES = {
    "rr": "tcp_rr, 1 flow, 1-byte request/response, unpinned",
    "rr_pinned": "tcp_rr, 1 flow, 1-byte request/response, client and server pinned to CPU 0",
    "stream": "tcp_stream, 1 flow, client to server",
}


def _fmt_rate(v, stream):
    return f"{v / 1e9:.2f}" if stream else f"{v:,.0f}"


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
    # row, tool, run, status, value, cli_cpu, srv_cpu, cli_wall, other_load
    runs = []
    for line in open(results_path):
        f = line.rstrip("\n").split("\t")
        if len(f) == 9:
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
      "client. Stream rate is bits per second received by the server.")
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
        stream = row == "stream"
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
        w(f"### {ROW_TITLES[row]}")
        w("")
        unit = "Gbit/s" if stream else "transactions/s"
        cpu_unit = "CPU s per GB" if stream else "CPU s per M transactions"
        w(f"| tool | median {unit} | min–max | thrum/peer | {cpu_unit} "
          "(client + server) | other load, CPUs | runs ok |")
        w("|---|---:|---:|---:|---:|---:|---:|")
        for t in tools:
            n_all = sum(1 for r in rr if r[1] == t)
            if not ok[t]:
                w(f"| {t} | failed | | | | | 0/{n_all} |")
                continue
            vals = [float(r[4]) for r in ok[t]]
            cpu_per = []
            cli_per, srv_per = [], []
            for r in ok[t]:
                v, c, s = float(r[4]), float(r[5]), float(r[6])
                # Every tool sends traffic only during its -l/-t window (thrum
                # runs with --warmup 0s for that reason), so rate x duration is
                # all the work the two processes did. Client wall time would
                # not do: sockperf idles for seconds around its test.
                work = (v * dur / 8 / 1e9) if stream else (v * dur / 1e6)
                cpu_per.append((c + s) / work)
                cli_per.append(c / work)
                srv_per.append(s / work)
            if t == "thrum":
                ratio = "—"
            elif med.get("thrum"):
                ratio = f"{med['thrum'] / med[t]:.2f}"
            else:
                ratio = "n/a"
            w(f"| {t} | {_fmt_rate(med[t], stream)} | "
              f"{_fmt_rate(min(vals), stream)}–{_fmt_rate(max(vals), stream)} | {ratio} | "
              f"{statistics.median(cpu_per):.2f} ({statistics.median(cli_per):.2f} + "
              f"{statistics.median(srv_per):.2f}) | "
              f"{statistics.median(float(r[8]) for r in ok[t]):.2f} | {len(ok[t])}/{n_all} |")
    w("")
    w("## Pinned vs. unpinned")
    w("")
    w(f"This is a {meta['nproc']}-vCPU VM. With one flow and strict ping-pong, "
      "the unpinned RR row is dominated by cross-CPU wake-ups: client and server "
      "usually sit on different vCPUs, each round trip wakes a sleeping task on "
      "the other vCPU (an IPI, which in a VM means a hypervisor exit, and often "
      "a vCPU leaving its idle state), so the rate measures the scheduler and the "
      "hypervisor far more than the tool. Pinning both ends to CPU 0 turns each "
      "wake-up into a local context switch; the rate then reflects the per-"
      "transaction cost of the two processes plus the kernel's loopback path, "
      "which is where the tools differ. Neither row says much about a real two-"
      "host network; compare tools within a row, not rows with each other.")
    w("")
    w("Expect, on a quiet machine, every tool to land at about the same unpinned "
      "rate, each process busy well under one CPU: the time goes to waking the "
      "other vCPU, not to the tools. Expect too that an unpinned run overlapping "
      "other load is faster, not slower: a busy second vCPU never halts, so "
      "waking it costs no idle exit (compare the raw runs with non-zero other "
      "load). The pinned row is the one that ranks the tools.")
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
        w(f"{ROW_TITLES[row]}:")
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
    w("Rate per run in order (RR: transactions/s; stream: Gbit/s), with the "
      "other load during the run in parentheses; `x` marks a failed run (see "
      "the log printed by compare.sh).")
    w("")
    for row in meta["rows"]:
        rr = [r for r in runs if r[0] == row]
        if not rr:
            continue
        stream = row == "stream"
        tools = []
        for r in rr:
            if r[1] not in tools:
                tools.append(r[1])
        w(f"- {row}:")
        for t in tools:
            vals = [(f"{_fmt_rate(float(r[4]), stream)} ({float(r[8]):.2f})"
                     if r[3] == "ok" else "x") for r in rr if r[1] == t]
            w(f"  - {t}: {', '.join(vals)}")
    w("")
    with open(out_path, "w") as f:
        f.write("\n".join(L))


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sub, argv = sys.argv[1], sys.argv[2:]
    cmds = {"run": cmd_run, "stat": cmd_stat, "quiet": cmd_quiet,
            "parse": cmd_parse, "report": cmd_report}
    cmds[sub](argv)


if __name__ == "__main__":
    main()
