#!/usr/bin/env python3
"""An SMTP server for tests: takes every mail, writes it to --dir as <n>.eml, and with
--deliver-cmd pipes it to that command (public-inbox-mda: the list archives it). Listens on
127.0.0.1, a free port written to --port-file once it accepts connections.
--kill-once PIDFILE: after the first mail is written and delivered, and before the sink
answers its end of DATA, SIGKILL the process whose pid PIDFILE holds (the sender: it dies
after handing the mail over and before learning it was taken) and write PIDFILE.killed."""
import argparse
import asyncore
import os
import signal
import smtpd
import subprocess
import sys


class Sink(smtpd.SMTPServer):
    def __init__(self, args):
        super().__init__(("127.0.0.1", 0), None, decode_data=False)
        self.args = args
        self.count = 0

    def process_message(self, peer, mailfrom, rcpttos, data, **kwargs):
        self.count += 1
        path = os.path.join(self.args.dir, "%04d.eml" % self.count)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.rename(path + ".tmp", path)
        with open(os.path.join(self.args.dir, "%04d.rcpt" % self.count), "w") as f:
            f.write("\n".join([mailfrom] + rcpttos) + "\n")
        if self.args.deliver_cmd:
            done = subprocess.run(self.args.deliver_cmd, shell=True, input=data)
            if done.returncode != 0:
                return "451 delivery command failed"
        if self.args.kill_once and not os.path.exists(self.args.kill_once + ".killed"):
            with open(self.args.kill_once) as f:
                pid = int(f.read().split()[0])
            os.kill(pid, signal.SIGKILL)
            with open(self.args.kill_once + ".killed", "w") as f:
                f.write("%d\n" % pid)
        return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--deliver-cmd", default="")
    p.add_argument("--kill-once", default="")
    args = p.parse_args()
    sink = Sink(args)
    port = sink.socket.getsockname()[1]
    with open(args.port_file + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.rename(args.port_file + ".tmp", args.port_file)
    asyncore.loop()


if __name__ == "__main__":
    sys.exit(main())
