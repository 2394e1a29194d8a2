#!/usr/bin/env python3
# A webhook receiver for the tests and the bench of the `webhook` sink (test/t/Statesman/Webhook.pm
# starts it): an HTTP/1.1 server (keep-alive) on loopback that verifies each request's Standard
# Webhooks signature itself and records what it received, one JSON line per request, in --log:
#   {"n", "t" (arrival, epoch seconds), "id", "timestamp", "signature_ok", "content_type",
#    "ids" (the messageId of each message, or the CloudEvents id), "body" (unless --no-bodies),
#    "status" (what it answered), "peer" (the client's port: one port = one connection)}
# Its behaviour is set at run time by POST /_control with a JSON object (every key optional):
#   {"fail_every": N}             every Nth request answers 503 (0: never)
#   {"hang_every": N, "hang_s": S} every Nth request waits S seconds, then answers 200
#   {"status": 400, "body": "…"}  every request answers that status and body (0: back to 200)
#   {"retry_after": "2", "retry_status": 429, "retry_count": K}
#                                 the next K requests answer retry_status with that Retry-After
# GET /_stats answers {"requests", "accepted", "messages", "bad_signatures"}.
# Anything else that is a POST is a webhook. --tls CERT KEY serves https.
import argparse
import base64
import hashlib
import hmac
import json
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {"fail_every": 0, "hang_every": 0, "hang_s": 0, "status": 0, "body": "", "retry_after": None,
         "retry_status": 429, "retry_count": 0}
stats = {"requests": 0, "accepted": 0, "messages": 0, "bad_signatures": 0}
args = None
key = None
log = None


def signature_ok(headers, body):
    if key is None:
        return headers.get("webhook-signature") is None
    wid, ts, sig = headers.get("webhook-id"), headers.get("webhook-timestamp"), headers.get("webhook-signature")
    if not wid or not ts or not sig:
        return False
    try:
        if abs(time.time() - int(ts)) > 300:
            return False
    except ValueError:
        return False
    expected = base64.b64encode(hmac.new(key, wid.encode() + b"." + ts.encode() + b"." + body,
                                         hashlib.sha256).digest()).decode()
    return any(s.startswith("v1,") and hmac.compare_digest(s[3:], expected) for s in sig.split(" "))


def message_ids(body):
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    items = doc if isinstance(doc, list) else [doc]
    return [m.get("messageId", m.get("id")) if isinstance(m, dict) else None for m in items]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/_stats":
            with lock:
                self.answer(200, json.dumps(stats).encode(), [("Content-Type", "application/json")])
        else:
            self.answer(404)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path == "/_control":
            with lock:
                state.update(json.loads(body))
            self.answer(200, b"{}")
            return
        t = time.time()
        with lock:
            stats["requests"] += 1
            n = stats["requests"]
            status, text, extra, hang = 200, b"", [], 0
            if state["retry_count"] > 0:
                state["retry_count"] -= 1
                status, extra = state["retry_status"], [("Retry-After", str(state["retry_after"]))]
                text = b"slow down"
            elif state["status"]:
                status, text = state["status"], state["body"].encode()
            elif state["fail_every"] and n % state["fail_every"] == 0:
                status, text = 503, b"try again later"
            elif state["hang_every"] and n % state["hang_every"] == 0:
                hang = state["hang_s"]
        ok = signature_ok(self.headers, body)
        if hang:
            time.sleep(hang)
        if not ok and status == 200:
            status, text = 401, b"bad signature"
        ids = message_ids(body)
        with lock:
            if not ok:
                stats["bad_signatures"] += 1
            if status == 200:
                stats["accepted"] += 1
                stats["messages"] += len(ids or [])
            if log is not None:
                rec = {"n": n, "t": t, "id": self.headers.get("webhook-id"),
                       "timestamp": self.headers.get("webhook-timestamp"), "signature_ok": ok,
                       "content_type": self.headers.get("Content-Type"), "ids": ids, "status": status,
                       "peer": self.client_address[1], "path": self.path, "authorization": self.headers.get("Authorization")}
                if not args.no_bodies:
                    rec["body"] = body.decode("utf-8", "replace")
                log.write(json.dumps(rec) + "\n")
                log.flush()
        try:
            self.answer(status, text, extra)
        except OSError:
            pass  # the client gave up (a hang past its timeout)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def main():
    global args, key, log
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file", required=True)
    p.add_argument("--log")
    p.add_argument("--secret")
    p.add_argument("--no-bodies", action="store_true")
    p.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    args = p.parse_args()
    if args.secret is not None:
        key = base64.b64decode(args.secret[6:]) if args.secret.startswith("whsec_") else args.secret.encode()
    if args.log:
        log = open(args.log, "a", encoding="utf-8")
    server = Server(("127.0.0.1", args.port), Handler)
    server.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if args.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls[0], args.tls[1])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
