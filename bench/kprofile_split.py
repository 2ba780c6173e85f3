#!/usr/bin/env python3
"""Split `perf script` samples into buckets by call stack (bench/kprofile.sh).

Reads `perf script` output (with call chains) on stdin and prints the share
of samples in each bucket. Samples of processes whose name does not start
with "thrum" (or with one of the names given with --comm a,b) are "other
processes". --per UNITS: also print each bucket's CPU time per unit (µs),
e.g. per transaction. Optional argument N: also list the N commonest leaf
functions of the syscall-and-driver bucket.
"""
import collections
import re
import sys

PROTO_TX = ("udp_sendmsg", "tcp_sendmsg")
PROTO_RX = ("udp_recvmsg", "tcp_recvmsg")
SOFTIRQ = ("net_rx_action", "__do_softirq", "handle_softirqs")
SCHED = ("__schedule", "schedule", "finish_task_switch.isra.0")
# Opening and closing connections (tcp_crr): the calls, not what their
# packets cost on arrival (softirq).
CONN = ("__sys_socket", "__sys_connect", "do_accept", "__sys_accept4", "__x64_sys_close",
        "__fput", "task_work_run", "inet_release", "tcp_close")
MACHINERY = "kernel: syscall and driver machinery (entry/exit, msghdr, epoll, io_uring)"


MEASURED = ("thrum",)


def classify(comm, frames):
    syms = [f[0] for f in frames]
    if comm == "swapper" or "do_idle" in syms:
        return "idle"
    if not comm.startswith(MEASURED):
        return "other processes"
    if frames and frames[0][1] != "kernel":
        return "user space (thrum, libc, vdso)"
    # On loopback the receive path runs in softirq inside the sender's call:
    # test it before the send path that contains it.
    if any(s in syms for s in SOFTIRQ):
        return "kernel: receive path in softirq (IP, UDP/TCP input, wake-up)"
    if any(s in syms for s in CONN):
        return "kernel: connection calls (socket, connect, accept, close)"
    if any(s in syms for s in PROTO_TX):
        return "kernel: send path (udp/tcp_sendmsg, IP output, loopback xmit)"
    if any(s in syms for s in PROTO_RX):
        return "kernel: receive call (udp/tcp_recvmsg: dequeue, copy, free)"
    if any(s in syms for s in SCHED):
        return "kernel: scheduler (sleep, wake, switch)"
    return MACHINERY


def main():
    global MEASURED
    args = sys.argv[1:]
    per = None
    while len(args) >= 2 and args[0] in ("--comm", "--per"):
        if args[0] == "--comm":
            MEASURED = tuple(args[1].split(","))
        else:
            per = float(args[1])
        args = args[2:]
    top = int(args[0]) if args else 0
    buckets, leaves = collections.Counter(), collections.Counter()
    ns = collections.Counter()
    total = 0
    header, frames = None, []

    def flush():
        nonlocal total
        if header is None:
            return
        k = classify(header.split()[0], frames)
        buckets[k] += 1
        m = re.search(r"\s(\d+) cpu-clock", header)
        ns[k] += int(m.group(1)) if m else 0
        total += 1
        if k == MACHINERY and frames:
            leaves[frames[0][0]] += 1

    for line in sys.stdin:
        if not line.strip():
            flush()
            header, frames = None, []
        elif line[0] in " \t":
            p = line.split()
            sym = re.sub(r"\+0x[0-9a-f]+$", "", p[1]) if len(p) > 1 else "?"
            dso = "kernel" if "kernel" in p[-1] else p[-1]
            frames.append((sym, dso))
        else:
            header = line
    flush()
    if not total:
        sys.exit("kprofile_split: no samples on stdin")
    for k, v in buckets.most_common():
        extra = f"  {ns[k] / 1e3 / per:8.2f} µs per unit" if per else ""
        print(f"{100 * v / total:6.1f}%{extra}  {k}")
    if top:
        print("  top leaf functions in the machinery bucket:")
        for k, v in leaves.most_common(top):
            print(f"    {100 * v / total:5.1f}% {k}")


if __name__ == "__main__":
    main()
