#!/usr/bin/env python3
"""Helpers for tests/dist/two_hosts.sh, used where the kernel has no netem qdisc.

  delay_relay.py relay IF1 IF2 DELAY_MS READY_FILE
      Forward every Ethernet frame that arrives on IF1 out of IF2 and back, each DELAY_MS later:
      a wire with a fixed one-way latency (what `tc qdisc ... netem delay` on both ends gives).
      Run it inside a namespace of its own that holds the two veth ends; the namespace has no
      addresses, so it only ever carries the frames of the two namespaces it joins. Frames keep
      their order. PACKET_VNET_HDR carries the offload metadata (GSO size, partial checksum) with
      each frame, so large TCP segments pass through whole instead of being dropped as over-MTU.
  delay_relay.py relay IF1 IF2 DELAY_MS READY_FILE --one-way [--loss P]
      What `tc qdisc add dev X root netem delay DELAY_MS loss P` gives on the interface whose
      frames arrive here on IF2: only frames from IF2 to IF1 are delayed, and each of them is
      dropped with probability P (0 to 1); frames from IF1 pass at once (tests/chaos/chaos.py).
  delay_relay.py echo HOST PORT
      A TCP echo server (one connection) for the round-trip probe.
  delay_relay.py rtt HOST PORT COUNT
      Connect to the echo server and print the median round-trip time in ms over COUNT pings.
"""
import collections
import os
import random
import select
import signal
import socket
import statistics
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_OUTGOING = 4


def open_packet_socket(ifname):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    s.bind((ifname, ETH_P_ALL))
    s.setblocking(False)
    return s


def relay(if1, if2, delay_ms, ready_file, *options):
    delay = float(delay_ms) / 1000.0
    one_way = "--one-way" in options
    loss = float(options[options.index("--loss") + 1]) if "--loss" in options else 0.0
    a = open_packet_socket(if1)
    b = open_packet_socket(if2)
    peer = {a: b, b: a}
    delays = {a: 0.0 if one_way else delay, b: delay}
    losses = {a: 0.0, b: loss}
    # One FIFO per direction: (time due, frame). A fixed delay keeps each FIFO sorted.
    queues = {a: collections.deque(), b: collections.deque()}
    stats = {"forwarded": 0, "send_errors": 0, "dropped": 0}

    def stop(_sig, _frame):
        print(f"delay_relay: forwarded {stats['forwarded']} frames, "
              f"{stats['send_errors']} send errors, {stats['dropped']} dropped", file=sys.stderr, flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with open(ready_file, "w") as f:
        f.write("ready\n")
    while True:
        now = time.monotonic()
        due = [q[0][0] for q in queues.values() if q]
        timeout = max(0.0, min(due) - now) if due else None
        readable, _, _ = select.select([a, b], [], [], timeout)
        for s in readable:
            while True:
                try:
                    data, addr = s.recvfrom(1 << 17)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:  # our own sends out of this interface
                    continue
                if losses[s] and random.random() < losses[s]:
                    stats["dropped"] += 1
                    continue
                queues[s].append((time.monotonic() + delays[s], data))
        now = time.monotonic()
        for s, q in queues.items():
            while q and q[0][0] <= now:
                _, data = q.popleft()
                try:
                    peer[s].send(data)
                    stats["forwarded"] += 1
                except OSError:
                    stats["send_errors"] += 1  # counts as a lost frame; TCP resends it


def echo(host, port):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, int(port)))
    srv.listen(1)
    srv.settimeout(30)
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        data = conn.recv(64)
        if not data:
            return
        conn.sendall(data)


def rtt(host, port, count):
    deadline = time.monotonic() + 10
    while True:
        try:
            c = socket.create_connection((host, int(port)), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    for _ in range(int(count)):
        t0 = time.perf_counter()
        c.sendall(b"x")
        if c.recv(1) != b"x":
            raise SystemExit("rtt: echo server closed the connection")
        times.append((time.perf_counter() - t0) * 1000.0)
    c.close()
    print(f"{statistics.median(times):.3f}")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "relay":
        relay(*args)
    elif cmd == "echo":
        echo(*args)
    elif cmd == "rtt":
        rtt(*args)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
