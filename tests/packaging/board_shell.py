#!/usr/bin/env python3
"""Runs one shell command on the packaging test's qemu board and prints its output.

The board's second serial port (ttyS1) is a qemu chardev on a unix socket; in the guest
fl-test-shell.service reads one line per command, "TAG BASE64", runs it with bash and
answers "@@FL TAG begin", the output, a newline and "@@FL TAG rc=N". The tag is fresh per call, so the
end of an earlier command that timed out is never taken for this one's.

Usage: board_shell.py SOCKET TIMEOUT_SECONDS COMMAND
Exit status: the command's, or 124 on a timeout, 125 when the socket cannot be reached.
"""
import base64
import os
import re
import socket
import sys
import time


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    path, timeout, command = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    tag = os.urandom(6).hex()
    deadline = time.monotonic() + timeout
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
    except OSError as e:
        print(f"board_shell: cannot connect to {path}: {e}", file=sys.stderr)
        return 125
    line = tag + " " + base64.b64encode(command.encode()).decode() + "\n"
    s.sendall(line.encode())
    begin = f"@@FL {tag} begin\n".encode()
    end = re.compile(rb"\n@@FL " + tag.encode() + rb" rc=(\d+)\n")
    buf = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            print(f"board_shell: no answer within {timeout:.0f} s: {command}", file=sys.stderr)
            return 124
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            print("board_shell: the board closed the port", file=sys.stderr)
            return 125
        buf += chunk
        start = buf.find(begin)
        if start < 0:
            continue
        m = end.search(buf, start + len(begin))
        if m:
            out = buf[start + len(begin):m.start()]
            sys.stdout.buffer.write(out)
            sys.stdout.flush()
            return int(m.group(1))


if __name__ == "__main__":
    sys.exit(main())
