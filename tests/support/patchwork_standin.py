#!/usr/bin/env python3
"""A stand-in for the part of patchwork's REST API (1.2) the series robot uses, for tests:
  GET  /api/1.2/patches/?msgid=<id>     the patches of that mail
  POST /api/1.2/patches/<id>/checks/    a check (Authorization: Token <token>)
  GET  /api/1.2/patches/<id>/checks/    the checks posted, oldest first
Patches come from --patches, a JSON list in patchwork's own shape ({"id", "msgid", "name",
...}: the seed's patchwork JSON). Modelled on https://patchwork.readthedocs.io/en/latest/api/rest/:
a check's state is one of pending, success, warning, fail; a missing or wrong token is 403.
A slow patchwork on demand: while the file --hold-file exists, each request is held (a line
"held METHOD PATH" appended to HOLD_FILE.log) until the file is removed or --hold-seconds
(20) pass, then answered ("answered METHOD PATH").
Listens on 127.0.0.1, a free port written to --port-file once it accepts connections."""
import argparse
import datetime
import http.server
import json
import os
import re
import sys
import threading
import time
import urllib.parse

STATES = {"pending", "success", "warning", "fail"}


def bare(msgid):
    return msgid.strip().strip("<>")


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "patchwork-standin/1.2"

    def log_message(self, fmt, *args):
        sys.stderr.write("patchwork-standin: " + fmt % args + "\n")

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def hold(self):
        hold_file = self.server.hold_file
        if not hold_file or not os.path.exists(hold_file):
            return
        what = "%s %s" % (self.command, self.path)
        with open(hold_file + ".log", "a") as f:
            f.write("held %s\n" % what)
        end = time.monotonic() + self.server.hold_seconds
        while os.path.exists(hold_file) and time.monotonic() < end:
            time.sleep(0.05)
        with open(hold_file + ".log", "a") as f:
            f.write("answered %s\n" % what)

    def do_GET(self):
        self.hold()
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/api/1.2/patches/":
            want = bare(urllib.parse.parse_qs(url.query).get("msgid", [""])[0])
            self.reply(200, [p for p in self.server.patches if bare(p["msgid"]) == want])
            return
        m = re.fullmatch(r"/api/1\.2/patches/(\d+)/checks/", url.path)
        if m:
            with self.server.lock:
                self.reply(200, self.server.checks.get(int(m.group(1)), []))
            return
        self.reply(404, {"detail": "Not found."})

    def do_POST(self):
        self.hold()
        m = re.fullmatch(r"/api/1\.2/patches/(\d+)/checks/", urllib.parse.urlsplit(self.path).path)
        if not m:
            self.reply(404, {"detail": "Not found."})
            return
        if self.headers.get("Authorization") != "Token " + self.server.token:
            self.reply(403, {"detail": "You do not have permission to perform this action."})
            return
        patch = int(m.group(1))
        if not any(p["id"] == patch for p in self.server.patches):
            self.reply(404, {"detail": "Not found."})
            return
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self.reply(400, {"detail": "JSON parse error"})
            return
        if body.get("state") not in STATES:
            self.reply(400, {"state": ["\"%s\" is not a valid choice." % body.get("state")]})
            return
        with self.server.lock:
            checks = self.server.checks.setdefault(patch, [])
            check = {"id": sum(len(c) for c in self.server.checks.values()) + 1,
                     "url": "http://%s/api/1.2/patches/%d/checks/%d/" % (
                         self.headers.get("Host", ""), patch, len(checks) + 1),
                     "date": datetime.datetime.utcnow().isoformat(),
                     "state": body["state"], "target_url": body.get("target_url"),
                     "context": body.get("context", "default"),
                     "description": body.get("description")}
            checks.append(check)
        self.reply(201, check)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--patches", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--hold-file", default="")
    p.add_argument("--hold-seconds", type=float, default=20)
    args = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(args.patches) as f:
        server.patches = json.load(f)
    server.token = args.token
    server.hold_file = args.hold_file
    server.hold_seconds = args.hold_seconds
    server.checks = {}
    server.lock = threading.Lock()
    with open(args.port_file + ".tmp", "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
