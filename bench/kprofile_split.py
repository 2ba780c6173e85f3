#!/usr/bin/env python3
"""Split `perf script` samples into buckets by call stack (bench/kprofile.sh).

Reads `perf script` output (with call chains) on stdin and prints the share
of samples in each bucket. Samples of processes whose name does not start
with "thrum" are "other processes". Optional argument N: also list the N
commonest leaf functions of the syscall-and-driver bucket.
"""
import collections
import re
import sys

PROTO_TX = ("udp_sendmsg", "tcp_sendmsg")
PROTO_RX = ("udp_recvmsg", "tcp_recvmsg")
SOFTIRQ = ("net_rx_action", "__do_softirq", "handle_softirqs")
SCHED = ("__schedule", "schedule", "finish_task_switch.isra.0")
MACHINERY = "kernel: syscall and driver machinery (entry/exit, msghdr, epoll, io_uring)"


def classify(comm, frames):
    syms = [f[0] for f in frames]
    if comm == "swapper" or "do_idle" in syms:
        return "idle"
    if not comm.startswith("thrum"):
        return "other processes"
    if frames and frames[0][1] != "kernel":
        return "user space (thrum, libc, vdso)"
    # On loopback the receive path runs in softirq inside the sender's call:
    # test it before the send path that contains it.
    if any(s in syms for s in SOFTIRQ):
        return "kernel: receive path in softirq (IP, UDP/TCP input, wake-up)"
    if any(s in syms for s in PROTO_TX):
        return "kernel: send path (udp/tcp_sendmsg, IP output, loopback xmit)"
    if any(s in syms for s in PROTO_RX):
        return "kernel: receive call (udp/tcp_recvmsg: dequeue, copy, free)"
    if any(s in syms for s in SCHED):
        return "kernel: scheduler (sleep, wake, switch)"
    return MACHINERY


def main():
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    buckets, leaves = collections.Counter(), collections.Counter()
    total = 0
    header, frames = None, []

    def flush():
        nonlocal total
        if header is None:
            return
        k = classify(header.split()[0], frames)
        buckets[k] += 1
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
        print(f"{100 * v / total:6.1f}%  {k}")
    if top:
        print("  top leaf functions in the machinery bucket:")
        for k, v in leaves.most_common(top):
            print(f"    {100 * v / total:5.1f}% {k}")


if __name__ == "__main__":
    main()
