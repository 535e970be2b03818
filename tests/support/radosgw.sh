#!/usr/bin/env bash
# Throwaway one-node Ceph cluster (mon + memstore OSD + radosgw) for e2e tests.
#
#   radosgw.sh start DIR     start everything under DIR, write DIR/env, exit 0
#                            once radosgw answers signed S3 requests (http, and
#                            https with a throwaway CA: S3_TLS_ENDPOINT, S3_CA)
#   radosgw.sh stop DIR      kill every daemon started from DIR (by pid), wait
#   radosgw.sh selftest DIR  PUT/GET/ranged GET/presigned GET against DIR/env
#   radosgw.sh status DIR    print which daemons are alive
#
# Everything (config, keyring, mon/osd data, logs, pid files, admin sockets)
# lives under DIR; /etc/ceph is never read (-c DIR/ceph.conf everywhere).
# Needs root (or a user allowed to run the ceph binaries) and Debian packages
# radosgw ceph-mon ceph-osd ceph-common; `start` installs them if missing.
set -euo pipefail

DEADLINE_SECS="${RADOSGW_START_TIMEOUT:-120}"
NICE="${RADOSGW_NICE:-5}"
DAEMONS=(radosgw osd.0 mon.a)   # stop order

# fd 3 = the caller's stderr, so messages from traps that fire while a probe
# runs with its output sent to /dev/null are still seen.
exec 3>&2
die() { echo "radosgw.sh: $*" >&3; exit 1; }
log() { echo "radosgw.sh: $*" >&3; }

usage() { die "usage: $0 {start|stop|selftest|status} DIR"; }

[[ $# -eq 2 ]] || usage
CMD="$1"
DIR="$2"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
CONF="$DIR/ceph.conf"

ceph_() { timeout 30 ceph -c "$CONF" --connect-timeout 10 "$@"; }

free_port() {
  python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}

proc_running() { # pid exists and is not a zombie
  local st
  st="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "$st" && "$st" != Z ]]
}

pid_alive() { # pidfile -> 0 if the recorded process is alive
  local f="$1" pid
  [[ -s "$f" ]] || return 1
  pid="$(cat "$f")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  proc_running "$pid" || return 1
  # really ours (guards against pid reuse): its cmdline has -c DIR/ceph.conf
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$CONF"
}

ensure_packages() {
  local missing=0 b
  for b in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool ceph-authtool; do
    command -v "$b" >/dev/null 2>&1 || missing=1
  done
  [[ $missing -eq 0 ]] && return 0
  log "installing ceph packages (radosgw ceph-mon ceph-osd ceph-common)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd ceph-common >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 &&
      apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd ceph-common >/dev/null; } ||
    die "apt-get install of ceph packages failed"
}

# spawn NAME cmd... : run a daemon in the foreground (-f) in the background,
# niced, in its own session, output to DIR/log/NAME.out, pid to DIR/run/NAME.pid
spawn() {
  local name="$1"; shift
  setsid nice -n "$NICE" "$@" </dev/null >>"$DIR/log/$name.out" 2>&1 &
  echo $! >"$DIR/run/$name.pid"
}

# wait_until DESC CMD... : poll CMD until it succeeds or the global deadline passes
wait_until() {
  local desc="$1"; shift
  while :; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if (( SECONDS >= START_DEADLINE )); then
      log "timed out waiting for: $desc"
      return 1
    fi
    check_daemons_alive || return 1
    sleep 0.5
  done
}

check_daemons_alive() {
  local d
  for d in "${STARTED[@]}"; do
    pid_alive "$DIR/run/$d.pid" || {
      log "$d died during startup; last log lines:"
      tail -n 20 "$DIR/log/$d.log" "$DIR/log/$d.out" >&3 2>/dev/null || true
      return 1
    }
  done
}

http_answers() { # any HTTP status line from URL counts as answering
  python3 - "$1" <<'EOF2'
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=5).read()
except urllib.error.HTTPError:
    pass
EOF2
}

osd_up()  { ceph_ osd dump --format json | python3 -c 'import json,sys;d=json.load(sys.stdin);sys.exit(0 if any(o["up"] and o["in"] for o in d["osds"]) else 1)'; }

s3py() { python3 - "$@" <<'PYEOF'
import sys, os, hmac, hashlib, datetime, urllib.request, urllib.parse, urllib.error, json

def load_env(d):
    env = {}
    with open(os.path.join(d, "env")) as f:
        for line in f:
            line = line.strip()
            if line and "=" in line:
                k, v = line.split("=", 1)
                env[k] = v
    return env

def _sign(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()

def _signing_key(secret, date, region):
    k = _sign(("AWS4" + secret).encode(), date)
    k = _sign(k, region)
    k = _sign(k, "s3")
    return _sign(k, "aws4_request")

def _canon_query(params):
    return "&".join("%s=%s" % (urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~"))
                    for k, v in sorted(params.items()))

def request(env, method, path, body=b"", headers=None, query=None):
    """SigV4 header-signed request; returns (status, headers, body)."""
    ep = urllib.parse.urlparse(env["S3_ENDPOINT"])
    host = ep.netloc
    now = datetime.datetime.utcnow()
    amzdate = now.strftime("%Y%m%dT%H%M%SZ")
    date = now.strftime("%Y%m%d")
    region = env["S3_REGION"]
    payload_hash = hashlib.sha256(body).hexdigest()
    hdrs = {"host": host, "x-amz-date": amzdate, "x-amz-content-sha256": payload_hash}
    for k, v in (headers or {}).items():
        hdrs[k.lower()] = v
    q = query or {}
    cpath = urllib.parse.quote(path, safe="/-_.~")
    signed = sorted(hdrs)
    creq = "\n".join([method, cpath, _canon_query(q),
                      "".join("%s:%s\n" % (h, hdrs[h].strip()) for h in signed),
                      ";".join(signed), payload_hash])
    scope = "%s/%s/s3/aws4_request" % (date, region)
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope, hashlib.sha256(creq.encode()).hexdigest()])
    sig = hmac.new(_signing_key(env["S3_SECRET_KEY"], date, region), sts.encode(), hashlib.sha256).hexdigest()
    hdrs["authorization"] = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
        env["S3_ACCESS_KEY"], scope, ";".join(signed), sig)
    url = env["S3_ENDPOINT"] + cpath + (("?" + _canon_query(q)) if q else "")
    del hdrs["host"]
    req = urllib.request.Request(url, data=body if method in ("PUT", "POST") else None,
                                 method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()

def presign(env, method, path, expires=300):
    ep = urllib.parse.urlparse(env["S3_ENDPOINT"])
    now = datetime.datetime.utcnow()
    amzdate = now.strftime("%Y%m%dT%H%M%SZ")
    date = now.strftime("%Y%m%d")
    region = env["S3_REGION"]
    scope = "%s/%s/s3/aws4_request" % (date, region)
    q = {"X-Amz-Algorithm": "AWS4-HMAC-SHA256",
         "X-Amz-Credential": "%s/%s" % (env["S3_ACCESS_KEY"], scope),
         "X-Amz-Date": amzdate, "X-Amz-Expires": str(expires), "X-Amz-SignedHeaders": "host"}
    cpath = urllib.parse.quote(path, safe="/-_.~")
    creq = "\n".join([method, cpath, _canon_query(q), "host:%s\n" % ep.netloc, "host", "UNSIGNED-PAYLOAD"])
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope, hashlib.sha256(creq.encode()).hexdigest()])
    q["X-Amz-Signature"] = hmac.new(_signing_key(env["S3_SECRET_KEY"], date, region),
                                    sts.encode(), hashlib.sha256).hexdigest()
    return env["S3_ENDPOINT"] + cpath + "?" + _canon_query(q)

def main():
    op, d = sys.argv[1], sys.argv[2]
    env = load_env(d)
    b = env["S3_BUCKET"]
    if op == "mkbucket":
        st, _, body = request(env, "PUT", "/" + b)
        if st not in (200, 409):
            sys.exit("create bucket %s: HTTP %d %s" % (b, st, body[:300]))
    elif op == "ready":   # signed ListObjects on the bucket must succeed
        st, _, body = request(env, "GET", "/" + b, query={"list-type": "2", "max-keys": "1"})
        if st != 200:
            sys.exit("list bucket: HTTP %d %s" % (st, body[:300]))
    elif op == "selftest":
        key = "selftest/obj-%d.bin" % os.getpid()
        data = os.urandom(5 * 1024 * 1024)
        digest = hashlib.sha256(data).hexdigest()
        st, h, body = request(env, "PUT", "/%s/%s" % (b, key), body=data,
                              headers={"content-type": "application/octet-stream"})
        assert st == 200, "PUT: HTTP %d %s" % (st, body[:300])
        print("PUT   5 MiB -> 200 etag=%s" % h.get("ETag"))
        st, h, body = request(env, "GET", "/%s/%s" % (b, key))
        assert st == 200, "GET: HTTP %d" % st
        assert hashlib.sha256(body).hexdigest() == digest, "GET: sha256 mismatch"
        print("GET   -> 200 %d bytes, sha256 matches (%s)" % (len(body), digest[:16]))
        st, h, body = request(env, "GET", "/%s/%s" % (b, key), headers={"range": "bytes=1000-1999"})
        assert st == 206, "ranged GET: HTTP %d" % st
        assert body == data[1000:2000], "ranged GET: content mismatch (%d bytes)" % len(body)
        print("GET   Range bytes=1000-1999 -> 206 %d bytes, Content-Range=%s, content matches"
              % (len(body), h.get("Content-Range")))
        url = presign(env, "GET", "/%s/%s" % (b, key))
        with urllib.request.urlopen(url, timeout=30) as r:
            pst, pbody = r.status, r.read()
        assert pst == 200 and hashlib.sha256(pbody).hexdigest() == digest, "presigned GET mismatch"
        print("GET   presigned (SigV4 query auth) -> 200, sha256 matches")
        bad = url.replace("X-Amz-Signature=", "X-Amz-Signature=0")
        try:
            urllib.request.urlopen(bad, timeout=30)
            raise AssertionError("tampered presigned URL was accepted")
        except urllib.error.HTTPError as e:
            assert e.code == 403, "tampered presigned URL: HTTP %d" % e.code
        print("GET   tampered presigned URL -> 403 (as expected)")
        st, _, _ = request(env, "DELETE", "/%s/%s" % (b, key))
        assert st == 204, "DELETE: HTTP %d" % st
        print("DELETE -> 204")
        print("selftest: 6 passed, 0 failed")
    else:
        sys.exit("unknown op " + op)

main()
PYEOF
}

# make_tls: a throwaway CA and a certificate for 127.0.0.1 and localhost it signed, in DIR/tls
make_tls() {
  local t="$DIR/tls"
  rm -rf "$t" && mkdir -p "$t"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=faultline test CA" \
    -keyout "$t/ca.key" -out "$t/ca.pem" >>"$DIR/log/tls.out" 2>&1 || die "openssl: CA"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$t/server.key" \
    -out "$t/server.csr" >>"$DIR/log/tls.out" 2>&1 || die "openssl: request"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$t/ext.cnf"
  openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial \
    -days 2 -extfile "$t/ext.cnf" -out "$t/server.pem" >>"$DIR/log/tls.out" 2>&1 || die "openssl: sign"
}

write_conf() {
  local fsid="$1" mon_port="$2" rgw_port="$3" rgw_tls_port="$4"
  cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$mon_port
public addr = 127.0.0.1
public network = 127.0.0.0/8
ms bind msgr2 = false
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
keyring = $DIR/keyring
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
log file = $DIR/log/\$name.log
pid file = $DIR/run/\$name.ceph.pid
crash dir = $DIR/crash
log to stderr = false
err to stderr = true
log to syslog = false
mon cluster log file = $DIR/log/cluster.log
mon cluster log to syslog = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1

[mon]
mon data = $DIR/mon
mon initial members = a

[osd]
osd data = $DIR/osd
osd objectstore = memstore
memstore device bytes = 1073741824
osd crush update on start = true
osd op num shards = 1
osd op num threads per shard = 2

[client]
log file = $DIR/log/\$name.log

[client.rgw.test]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port ssl_endpoint=127.0.0.1:$rgw_tls_port ssl_certificate=$DIR/tls/server.pem ssl_private_key=$DIR/tls/server.key
rgw data = $DIR/rgw
rgw thread pool size = 32
rgw enable usage log = false
rgw enable ops log = false
EOF
}

do_start() {
  ensure_packages
  local d
  for d in "${DAEMONS[@]}"; do
    pid_alive "$DIR/run/$d.pid" && die "$d from $DIR is still running (pid $(cat "$DIR/run/$d.pid")); stop it first"
  done
  rm -rf "$DIR/mon" "$DIR/osd" "$DIR/rgw" "$DIR/run" "$DIR/log" "$DIR/crash" \
         "$DIR/env" "$DIR/ceph.conf" "$DIR/keyring" "$DIR/monmap"
  mkdir -p "$DIR/mon" "$DIR/osd" "$DIR/rgw" "$DIR/run" "$DIR/log" "$DIR/crash"

  START_DEADLINE=$(( SECONDS + DEADLINE_SECS ))
  STARTED=()
  START_OK=0
  trap 'exit 130' INT TERM
  trap start_cleanup EXIT

  local fsid mon_port rgw_port rgw_tls_port osd_uuid
  fsid="$(python3 -c 'import uuid;print(uuid.uuid4())')"
  osd_uuid="$(python3 -c 'import uuid;print(uuid.uuid4())')"
  mon_port="$(free_port)"
  rgw_port="$(free_port)"
  while [[ "$rgw_port" == "$mon_port" ]]; do rgw_port="$(free_port)"; done
  rgw_tls_port="$(free_port)"
  while [[ "$rgw_tls_port" == "$mon_port" || "$rgw_tls_port" == "$rgw_port" ]]; do
    rgw_tls_port="$(free_port)"
  done
  make_tls
  write_conf "$fsid" "$mon_port" "$rgw_port" "$rgw_tls_port"

  # mon
  # one keyring for every entity; imported into the mon's auth db at mkfs
  ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$DIR/keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
  ceph-authtool "$DIR/keyring" --gen-key -n osd.0 \
    --cap mon 'allow profile osd' --cap mgr 'allow profile osd' --cap osd 'allow *' >/dev/null
  ceph-authtool "$DIR/keyring" --gen-key -n client.rgw.test \
    --cap mon 'allow rw' --cap osd 'allow rwx' --cap mgr 'allow rw' >/dev/null
  monmaptool --create --fsid "$fsid" --addv a "[v1:127.0.0.1:$mon_port]" "$DIR/monmap" >/dev/null
  ceph-mon -c "$CONF" -i a --mkfs --monmap "$DIR/monmap" --keyring "$DIR/keyring" \
    >>"$DIR/log/mkfs.out" 2>&1 || { cat "$DIR/log/mkfs.out" >&3; die "ceph-mon --mkfs failed"; }
  spawn mon.a ceph-mon -f -c "$CONF" -i a
  STARTED+=(mon.a)
  wait_until "mon quorum" ceph_ mon stat

  # osd (memstore: no disk needed)
  local osd_id
  osd_id="$(ceph_ osd new "$osd_uuid")"
  [[ "$osd_id" == 0 ]] || die "unexpected osd id '$osd_id'"
  ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$DIR/log/mkfs.out" 2>&1 ||
    { cat "$DIR/log/mkfs.out" >&3; die "ceph-osd --mkfs failed"; }
  spawn osd.0 ceph-osd -f -c "$CONF" -i 0
  STARTED+=(osd.0)
  wait_until "osd.0 up and in" osd_up

  # radosgw (creates its own pools on first start)
  spawn radosgw radosgw -f -c "$CONF" -n client.rgw.test
  STARTED+=(radosgw)
  wait_until "radosgw HTTP on port $rgw_port" \
    http_answers "http://127.0.0.1:$rgw_port/"

  # S3 user + bucket
  local user_json access secret bucket="faultline-test"
  user_json="$(timeout 60 radosgw-admin -c "$CONF" -n client.admin user create \
                 --uid=faultline --display-name="faultline e2e" 2>>"$DIR/log/radosgw-admin.out")"
  access="$(python3 -c 'import json,sys;print(json.load(sys.stdin)["keys"][0]["access_key"])' <<<"$user_json")"
  secret="$(python3 -c 'import json,sys;print(json.load(sys.stdin)["keys"][0]["secret_key"])' <<<"$user_json")"
  cat >"$DIR/env.tmp" <<EOF
S3_ENDPOINT=http://127.0.0.1:$rgw_port
S3_TLS_ENDPOINT=https://127.0.0.1:$rgw_tls_port
S3_CA=$DIR/tls/ca.pem
S3_TLS_CERT=$DIR/tls/server.pem
S3_TLS_KEY=$DIR/tls/server.key
S3_ACCESS_KEY=$access
S3_SECRET_KEY=$secret
S3_BUCKET=$bucket
S3_REGION=us-east-1
EOF
  mv "$DIR/env.tmp" "$DIR/env"
  wait_until "bucket $bucket created" s3py mkbucket "$DIR"
  wait_until "signed S3 ListObjectsV2 on $bucket" s3py ready "$DIR"
  wait_until "radosgw HTTPS on port $rgw_tls_port" \
    curl -sS --cacert "$DIR/tls/ca.pem" -o /dev/null "https://127.0.0.1:$rgw_tls_port/"
  START_OK=1
  log "ready: $(head -n1 "$DIR/env") (pids: mon $(cat "$DIR/run/mon.a.pid"), osd $(cat "$DIR/run/osd.0.pid"), rgw $(cat "$DIR/run/radosgw.pid"))"
}

start_cleanup() {
  local rc=$?
  [[ "${START_OK:-0}" == 1 ]] && return 0
  log "start failed (exit $rc); logs are in $DIR/log; stopping what was started"
  local d
  for d in "${STARTED[@]}"; do
    tail -n 5 "$DIR/log/$d.log" >&3 2>/dev/null || true
  done
  do_stop || true
  exit "$rc"
}

# Stop one at a time, in order rgw -> osd -> mon: an OSD stopped after its mon
# waits osd_mon_shutdown_timeout (5 s) for an ack that never comes.
do_stop() {
  local d pid n=0 deadline pids=()
  for d in "${DAEMONS[@]}"; do
    pid_alive "$DIR/run/$d.pid" || { rm -f "$DIR/run/$d.pid"; continue; }
    pid="$(cat "$DIR/run/$d.pid")"
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$(( SECONDS + 20 ))
    while proc_running "$pid"; do
      if (( SECONDS >= deadline )); then
        log "$d (pid $pid) ignored SIGTERM for 20 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
      fi
      sleep 0.1
    done
    rm -f "$DIR/run/$d.pid"
    pids+=("$pid")
    n=$((n + 1))
  done
  # The daemons are re-parented to init; give it a moment (bounded) to reap
  # the zombies so that a `ps` right after `stop` shows nothing.
  deadline=$(( SECONDS + 5 ))
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done   # our own children (failed start)
  for pid in "${pids[@]}"; do
    while [[ -e "/proc/$pid" ]] && (( SECONDS < deadline )); do sleep 0.1; done
  done
  # memstore dumps its contents into osd data on shutdown; drop all state,
  # keep ceph.conf and logs for post-mortems.
  rm -rf "$DIR/osd" "$DIR/mon" "$DIR/rgw" "$DIR/run" "$DIR/env" "$DIR/tls"
  log "stopped $n daemon(s)"
}

do_status() {
  local d rc=0
  for d in "${DAEMONS[@]}"; do
    if pid_alive "$DIR/run/$d.pid"; then echo "$d running pid $(cat "$DIR/run/$d.pid")"
    else echo "$d not running"; rc=1; fi
  done
  return $rc
}

case "$CMD" in
  start)    do_start ;;
  stop)     do_stop ;;
  selftest) [[ -s "$DIR/env" ]] || die "no $DIR/env; run start first"; s3py selftest "$DIR" ;;
  status)   do_status ;;
  *)        usage ;;
esac
