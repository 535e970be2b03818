#!/usr/bin/env python3
"""A TCP proxy for HTTP that cuts a response short, once: the network dropping in the
middle of a download.

  cutting_proxy.py LISTEN_PORT_FILE UPSTREAM_HOST UPSTREAM_PORT PATH_PREFIX CUT_AFTER LOG

Listens on a free 127.0.0.1 port (written to LISTEN_PORT_FILE), forwards every connection to
UPSTREAM unchanged (the Host header too, so signatures stay valid). The first response to a
GET whose path starts with PATH_PREFIX is cut after its headers and CUT_AFTER bytes of body
(the connection closed); later ones pass whole. Each request line and Range header is
appended to LOG.
"""
import socket
import sys
import threading

port_file, up_host, up_port, prefix, cut_after, log_path = sys.argv[1:7]
up_port, cut_after = int(up_port), int(cut_after)
lock = threading.Lock()
state = {"cut": False}


def log(line):
    with lock, open(log_path, "a") as f:
        f.write(line + "\n")


def serve(client):
    upstream = socket.create_connection((up_host, up_port))
    head = b""
    while b"\r\n\r\n" not in head:
        data = client.recv(65536)
        if not data:
            break
        head += data
    lines = head.split(b"\r\n")
    request_line = lines[0].decode(errors="replace")
    rng = [l.decode(errors="replace") for l in lines if l.lower().startswith(b"range:")]
    log(request_line + (" " + rng[0] if rng else ""))
    parts = request_line.split(" ")
    cut = False
    with lock:
        if len(parts) > 1 and parts[0] == "GET" and parts[1].startswith(prefix) and not state["cut"]:
            state["cut"] = cut = True
    upstream.sendall(head)

    def pump_up():
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                upstream.sendall(data)
        except OSError:
            pass

    threading.Thread(target=pump_up, daemon=True).start()
    sent, body_seen, buf = 0, None, b""
    try:
        while True:
            data = upstream.recv(65536)
            if not data:
                break
            if cut:
                buf += data
                if body_seen is None and b"\r\n\r\n" in buf:
                    body_seen = buf.index(b"\r\n\r\n") + 4
                if body_seen is not None and len(buf) >= body_seen + cut_after:
                    client.sendall(buf[: body_seen + cut_after])
                    log("cut after %d body bytes" % cut_after)
                    break
                continue
            client.sendall(data)
    except OSError:
        pass
    for s in (client, upstream):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(16)
with open(port_file + ".tmp", "w") as f:
    f.write(str(listener.getsockname()[1]))
import os
os.rename(port_file + ".tmp", port_file)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
