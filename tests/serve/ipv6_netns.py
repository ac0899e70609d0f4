"""Run by test_attack.py inside a network namespace of its own (unshare -rn):
IPv6 addresses of two /64 networks on its loopback, a server that allows
both, and --max-connections-per-ip counted per /64: two held connections
from two addresses of one /64 fill its share, a third address of it takes
the place of the oldest of them (it would not, counted per address), and
another /64 is served. Exit 0 when all of that holds; the reason otherwise."""
import select
import socket
import subprocess
import sys
import time

from conftest import SLOW, SMALL, Server

NET_A = ["2001:db8:a::%d" % i for i in (1, 2, 3, 4)]  # one /64
NET_B = "2001:db8:b::1"                               # another


def connect(server, source, data):
    sock = socket.create_connection((NET_A[0], server.port), timeout=5 * SLOW, source_address=(source, 0))
    sock.sendall(data)
    return sock


def health(server, source):
    """The status line of GET /health from `source`; '' when closed without an answer."""
    try:
        sock = connect(server, source, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        line = sock.makefile("rb").readline().decode()
        sock.close()
        return line.strip()
    except OSError:
        return ""


def main():
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for a in NET_A + [NET_B]:
        subprocess.run(["ip", "-6", "addr", "add", a + "/64", "dev", "lo", "nodad"], check=True)
    s = Server(SMALL, "--host", "::", "--allow", "2001:db8::/32", "--allowed-hosts", "*",
               "--max-connections-per-ip", "2", "--request-timeout", "30")
    try:
        held = [connect(s, a, b"GET /health HTTP/1.1\r\nHo") for a in NET_A[1:3]]
        time.sleep(0.3 * SLOW)
        third = health(s, NET_A[3])
        if not third.startswith("HTTP/1.1 200"):
            return "a third address of the /64 was not served: %r" % third
        readable, _, _ = select.select(held, [], [], 2 * SLOW)
        if [sock.recv(1) for sock in readable] != [b""]:
            return "the third did not take a place of the /64's share: counted per address, not per /64"
        other = health(s, NET_B)
        if not other.startswith("HTTP/1.1 200"):
            return "another /64 was not served: %r" % other
        for sock in held:
            sock.close()
    finally:
        s.stop()
    return None


if __name__ == "__main__":
    why = main()
    print(why or "ok")
    sys.exit(1 if why else 0)
