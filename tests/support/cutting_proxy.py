#!/usr/bin/env python3
"""A TCP proxy for HTTP(S) that cuts or stalls downloads: the network dropping in the middle
of a download, or a download under way when its client is killed.

  cutting_proxy.py LISTEN_PORT_FILE UPSTREAM_HOST UPSTREAM_PORT PATH_PREFIX ACTIONS LOG
                   [CERT KEY CA]

Listens on a free 127.0.0.1 port (written to LISTEN_PORT_FILE), forwards every connection to
UPSTREAM unchanged (the Host header too, so signatures stay valid). ACTIONS is a comma list
applied in turn to the GETs whose path starts with PATH_PREFIX and that carry no Range
header (each a new download); later ones, and every resumed (Range) GET, pass whole:
  cut:N    the response is cut after its headers and N bytes of body (connection closed)
  stall:N  the response stops after its headers and N bytes of body; the connection stays
           open until the client closes it
  N        cut:N
Each request line (with its Range header) and each action taken is appended to LOG.
With CERT KEY CA the proxy speaks TLS on both sides: it serves CERT/KEY to its clients and
verifies UPSTREAM's certificate against CA, so clients and store both talk https.
"""
import os
import select
import socket
import ssl
import sys
import threading

port_file, up_host, up_port, prefix, actions_arg, log_path = sys.argv[1:7]
up_port = int(up_port)
tls = sys.argv[7:10] if len(sys.argv) >= 10 else None
actions = []
for a in actions_arg.split(","):
    kind, _, n = a.rpartition(":")
    actions.append((kind or "cut", int(n)))
lock = threading.Lock()

server_ctx = client_ctx = None
if tls:
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tls[0], tls[1])
    client_ctx = ssl.create_default_context(cafile=tls[2])


def log(line):
    with lock, open(log_path, "a") as f:
        f.write(line + "\n")


def serve(client):
    try:
        if server_ctx:
            client = server_ctx.wrap_socket(client, server_side=True)
        upstream = socket.create_connection((up_host, up_port))
        if client_ctx:
            upstream = client_ctx.wrap_socket(upstream, server_hostname=up_host)
    except (OSError, ssl.SSLError) as e:
        log("connection refused: %s" % e)
        client.close()
        return
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
    action = None
    with lock:
        if len(parts) > 1 and parts[0] == "GET" and parts[1].startswith(prefix) and not rng \
                and actions:
            action = actions.pop(0)
    upstream.sendall(head)
    # One thread relays both ways (select): an SSL socket must not be read in one thread
    # while another writes to it.
    body_seen, buf, stalled = None, b"", False
    try:
        while True:
            ready = [s for s in (client, upstream) if isinstance(s, ssl.SSLSocket) and s.pending()]
            if not ready:
                ready, _, _ = select.select([client] if stalled else [client, upstream], [], [])
            for s in ready:
                data = s.recv(65536)
                if not data:
                    if stalled:
                        log("client closed the stalled download")
                    raise EOFError
                if s is client:
                    if not stalled:
                        upstream.sendall(data)
                    continue
                if stalled:
                    continue
                if not action:
                    client.sendall(data)
                    continue
                buf += data
                if body_seen is None and b"\r\n\r\n" in buf:
                    body_seen = buf.index(b"\r\n\r\n") + 4
                if body_seen is not None and len(buf) >= body_seen + action[1]:
                    client.sendall(buf[: body_seen + action[1]])
                    if action[0] != "stall":
                        log("cut after %d body bytes" % action[1])
                        raise EOFError
                    log("stalled after %d body bytes" % action[1])
                    stalled = True  # until the client goes away
    except (OSError, EOFError):
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
os.rename(port_file + ".tmp", port_file)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
