#!/usr/bin/env python3
"""RSS of the `noe` server after 100 admissions of pods whose one image is an index with a
4,000,000-byte architecture string (a different one each): issue 10, defect 3. Results and how
to read them: docs/benchmarks.md, "Memory after 100 hostile lookups".

    cargo build --release -p noe --bin noe
    python3 scripts/hostile-memory.py target/release/noe

Serves the hostile indexes from a plain-HTTP registry on loopback (Python's http.server), starts
`noe` with a self-signed certificate and the container image's allocator settings, sends the
admissions one after the other, and reads VmRSS / VmHWM from /proc. Loopback only.
"""
import json, os, socket, ssl, subprocess, sys, threading, time, urllib.request
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

NOE = sys.argv[1]
N = 100
LEN = 4_000_000
OCI_INDEX = "application/vnd.oci.image.index.v1+json"

class Registry(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if "/manifests/" in self.path:
            seed = int(self.path.split("/")[2].removeprefix("hostile"))
            arch = f"{seed:08d}" + "a" * (LEN - 8)
            body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": "sha256:" + "a" * 64, "size": 1,
                "platform": {"os": "linux", "architecture": arch}}]}).encode()
            self.send_response(200)
            self.send_header("content-type", OCI_INDEX)
        else:
            body = b"{}"
            self.send_response(200)
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

registry = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
threading.Thread(target=registry.serve_forever, daemon=True).start()
reg = f"127.0.0.1:{registry.server_address[1]}"
web, met, health = free_port(), free_port(), free_port()
env = dict(os.environ, MIMALLOC_PURGE_DELAY="0", MIMALLOC_ARENA_EAGER_COMMIT="0")
noe = subprocess.Popen([NOE, f"--webhook-addr=127.0.0.1:{web}", f"--metrics-addr=127.0.0.1:{met}",
    f"--health-probe-addr=127.0.0.1:{health}", "--dev-self-signed-cert",
    f"--insecure-registries={reg}", "--log-level=error"], env=env,
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def rss():
    f = dict(l.split(":", 1) for l in open(f"/proc/{noe.pid}/status").read().splitlines() if ":" in l)
    return int(f["VmRSS"].split()[0]) / 1024, int(f["VmHWM"].split()[0]) / 1024
try:
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=1); break
        except Exception: time.sleep(0.1)
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    def admit(i):
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": f"u{i}", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "bench",
            "operation": "CREATE", "object": {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "bench"},
            "spec": {"containers": [{"name": "c", "image": f"{reg}/hostile{i}/app:1"}]}}}}
        req = urllib.request.Request(f"https://127.0.0.1:{web}/mutate", data=json.dumps(review).encode(),
                                     headers={"content-type": "application/json"})
        return json.load(urllib.request.urlopen(req, context=ctx, timeout=30))
    time.sleep(1)
    idle = rss()[0]
    allowed = 0
    for i in range(N):
        allowed += admit(i)["response"]["allowed"]
    time.sleep(2)
    after, peak = rss()
    print(f"{NOE}: {N} hostile admissions ({allowed} allowed): RSS idle {idle:.1f} MiB, after {after:.1f} MiB, peak {peak:.1f} MiB")
finally:
    noe.kill()
    registry.shutdown()
