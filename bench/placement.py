#!/usr/bin/env python3
"""Where the scheduler puts a loopback tcp_stream's two ends, run by run.

On a small VM a single-flow loopback stream is bound by the sender's CPU
(the sender's system call also runs the loopback receive path), and how
much it moves per CPU-second depends on whether the receiving thread sits on
the sender's CPU (the data stays in that CPU's cache) or on another one.
That is the scheduler's choice, run by run, for every tool alike. This
script runs thrum, netperf and iperf3 (those on PATH) alternately, samples
every few milliseconds the CPU each end's busiest thread is on
(/proc/PID/task/TID/stat, field 39), and prints per run the Gbit/s, the
share of samples in which both ends were on one CPU, the CPU migrations of
the two data threads and the other load on the machine; then per tool the
median Gbit/s and the median Gbit/s of the runs mostly together (share
>= 0.8) and mostly apart (<= 0.2), so a ranking of the tools can be told
apart from a ranking of their placements.

All traffic goes to 127.0.0.1; every process runs under a deadline.

usage: bench/placement.py [--runs N] [--duration S] [--size BYTES|0]
                          [--tools thrum,netperf,iperf3] [--thrum PATH]
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PORT_THRUM, PORT_NETPERF, PORT_IPERF3 = 15871, 15872, 15873


def threads(pid):
    """{tid: (cpu, busy_ticks)} of a process's threads now."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        # Fields after the command name, which may hold spaces.
        rest = s[s.rindex(")") + 2:].split()
        # rest[0] is field 3 (state): field N is rest[N - 3].
        out[int(tid)] = (int(rest[39 - 3]), int(rest[14 - 3]) + int(rest[15 - 3]))
    return out


def busy_cpu():
    """Busy jiffies of the whole machine (user+nice+system+irq+softirq+steal)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]


def wait_port(port, deadline):
    while time.time() < deadline:
        r = subprocess.run(["ss", "-Htln", f"sport = :{port}"], capture_output=True, text=True)
        if r.stdout.strip():
            return True
        time.sleep(0.05)
    return False


def commands(tool, thrum, d, size):
    """(server argv, client argv, port) of one tool at SIZE-byte sends and
    receives, or at its own defaults where SIZE is 0."""
    sizes = {"thrum": ["-m", str(size), "-M", str(size)],
             "netperf": ["--", "-m", str(size), "-M", str(size)],
             "iperf3": ["-l", str(size)]}[tool] if size else []
    if tool == "thrum":
        return ([thrum, "server", "-p", str(PORT_THRUM), "--listen", "127.0.0.1"],
                [thrum, "run", "tcp_stream", "-H", f"127.0.0.1:{PORT_THRUM}", "-l", f"{d}s",
                 "--warmup", "0s", "--json", "--no-save", *sizes],
                PORT_THRUM)
    if tool == "netperf":
        return (["netserver", "-D", "-f", "-p", str(PORT_NETPERF), "-L", "127.0.0.1,4"],
                ["netperf", "-H", "127.0.0.1,4", "-p", str(PORT_NETPERF), "-l", str(d), "-P", "0",
                 "-t", "TCP_STREAM", "-f", "m", *(sizes or ["--"]), "-o", "THROUGHPUT"],
                PORT_NETPERF)
    return (["iperf3", "-s", "-B", "127.0.0.1", "-p", str(PORT_IPERF3), "-1"],
            ["iperf3", "-c", "127.0.0.1", "-p", str(PORT_IPERF3), "-t", str(d), *sizes, "--json"],
            PORT_IPERF3)


def gbits(tool, out):
    if tool == "thrum":
        return json.loads(out)["summary"]["throughput_bps"] / 1e9
    if tool == "netperf":
        return float(out.strip().splitlines()[-1]) / 1e3
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9


def one_run(tool, thrum, d, size, period):
    srv_argv, cli_argv, port = commands(tool, thrum, d, size)
    srv = subprocess.Popen(srv_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_port(port, time.time() + 10):
            raise RuntimeError(f"{tool}: its server did not listen on {port}")
        b0, t0 = busy_cpu(), time.time()
        cli = subprocess.Popen(cli_argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
        samples = []  # (client threads, server threads)
        while cli.poll() is None and time.time() - t0 < d + 20:
            samples.append((threads(cli.pid), threads(srv.pid)))
            time.sleep(period)
        out, _ = cli.communicate(timeout=30)
        b1, t1 = busy_cpu(), time.time()
    finally:
        srv.send_signal(signal.SIGINT)
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
    # Each end's data thread: the one that gained the most CPU time.
    def busiest(i):
        first, last = {}, {}
        for s in samples:
            for tid, (_, ticks) in s[i].items():
                first.setdefault(tid, ticks)
                last[tid] = ticks
        return max(last, key=lambda t: last[t] - first[t]) if last else None

    ct, st = busiest(0), busiest(1)
    together = apart = moves = 0
    prev = (None, None)
    for c, s in samples:
        if ct in c and st in s:
            cc, sc = c[ct][0], s[st][0]
            if cc == sc:
                together += 1
            else:
                apart += 1
            moves += (prev[0] is not None and prev[0] != cc) + (prev[1] is not None and prev[1] != sc)
            prev = (cc, sc)
    n = together + apart
    # The machine's busy CPUs over the run, the two ends' own included.
    hz = os.sysconf("SC_CLK_TCK")
    busy = (b1 - b0) / hz / max(t1 - t0, 1e-9)
    return {
        "tool": tool,
        "gbit": gbits(tool, out),
        "together": together / n if n else float("nan"),
        "moves": moves,
        "samples": n,
        "busy_cpus": busy,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--size", type=int, default=65536,
                    help="bytes per send and per receive, every tool; 0: each tool's defaults")
    ap.add_argument("--tools", default="thrum,netperf,iperf3")
    ap.add_argument("--thrum", default=os.path.join(ROOT, "target/release/thrum"))
    ap.add_argument("--period", type=float, default=0.01, help="seconds between samples")
    a = ap.parse_args()
    if not 1 <= a.runs <= 100 or not 1 <= a.duration <= 60:
        sys.exit("--runs must be 1 to 100 and --duration 1 to 60 seconds")
    if not 0 <= a.size <= 1 << 24:
        sys.exit("--size must be 0 (each tool's defaults) to 16777216 bytes")
    tools = [t for t in a.tools.split(",") if t]
    for t in tools:
        if t not in ("thrum", "netperf", "iperf3"):
            sys.exit(f"--tools: unknown tool {t!r} (thrum, netperf, iperf3)")
    need = {"thrum": a.thrum, "netperf": "netperf", "iperf3": "iperf3"}
    tools = [t for t in tools if shutil.which(need[t]) or os.access(need[t], os.X_OK)]
    runs = []
    print("tool     Gbit/s  together  moves  busy CPUs (all, the tools' too)")
    for r in range(a.runs):
        for t in tools:
            x = one_run(t, a.thrum, a.duration, a.size, a.period)
            runs.append(x)
            print(f"{t:8} {x['gbit']:6.2f}  {x['together']:8.2f}  {x['moves']:5d}  {x['busy_cpus']:.2f}",
                  flush=True)
    print("\ntool     runs  median Gbit/s  median together  together>=0.8: n, median  apart<=0.2: n, median")
    for t in tools:
        xs = [x for x in runs if x["tool"] == t]
        tog = [x["gbit"] for x in xs if x["together"] >= 0.8]
        apt = [x["gbit"] for x in xs if x["together"] <= 0.2]
        med = lambda v: f"{statistics.median(v):6.2f}" if v else "     -"
        print(f"{t:8} {len(xs):4}  {med([x['gbit'] for x in xs])}         "
              f"{statistics.median([x['together'] for x in xs]):5.2f}            "
              f"{len(tog):2}, {med(tog)}              {len(apt):2}, {med(apt)}")


if __name__ == "__main__":
    main()
