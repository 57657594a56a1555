#!/usr/bin/env python3
"""Memory of one admission naming an image on each of N registry hosts (docs/benchmarks.md).

A loopback listener on 0.0.0.0:PORT accepts every connection on every 127.x.y.z address and
never answers (a hung registry on N hosts). `noe` (release build, `--dev-self-signed-cert`,
loopback registries allowed) gets one AdmissionReview whose pod names `127.A.B.C:PORT/app:1`
for N distinct hosts. Printed: RSS idle, peak RSS during the admission (VmHWM), RSS after,
open file descriptors at their highest sample, and how long the answer took.

Only loopback addresses. Bounded: one admission, one answer or a 30 s client timeout.

    python3 scripts/many-hosts.py --noe target/release/noe --hosts 6000
"""

import argparse
import asyncio
import json
import os
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def hung_registry(port, stop):
    """Accepts and holds connections; never writes a byte."""

    async def main():
        held = []

        async def hold(reader, writer):
            held.append(writer)
            try:
                while await reader.read(4096):
                    pass
            except (ConnectionError, OSError):
                pass

        server = await asyncio.start_server(hold, "0.0.0.0", port, backlog=4096)
        async with server:
            while not stop.is_set():
                await asyncio.sleep(0.05)

    asyncio.run(main())


def review(hosts, port):
    containers = []
    for i in range(hosts):
        a, b, c = 1 + i // 65536, (i // 256) % 256, 1 + i % 254
        containers.append({"name": f"c{i}", "image": f"127.{a}.{b}.{c}:{port}/app:1"})
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "many", "namespace": "default"},
           "spec": {"containers": containers}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "many-hosts", "operation": "CREATE", "namespace": "default",
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "userInfo": {"username": "bench"},
                        "object": pod}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--noe", required=True)
    parser.add_argument("--hosts", type=int, default=6000)
    args = parser.parse_args()
    if not 1 <= args.hosts <= 60000:
        raise SystemExit("--hosts: 1..60000")

    registry_port = free_port()
    stop = threading.Event()
    threading.Thread(target=hung_registry, args=(registry_port, stop), daemon=True).start()

    webhook, metrics, health = free_port(), free_port(), free_port()
    with tempfile.TemporaryDirectory() as certs:
        noe = subprocess.Popen(
            [args.noe, f"--cert-dir={certs}", "--dev-self-signed-cert",
             f"--webhook-addr=127.0.0.1:{webhook}", f"--metrics-addr=127.0.0.1:{metrics}",
             f"--health-probe-addr=127.0.0.1:{health}", "--allow-registry-cidrs=127.0.0.0/8",
             "--log-level=error"],
            env={**os.environ, "KUBECONFIG": "/nonexistent"},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=0.5)
                    break
                except OSError:
                    if time.monotonic() > deadline or noe.poll() is not None:
                        raise SystemExit("noe did not become ready")
                    time.sleep(0.1)
            time.sleep(1)
            idle = status(noe.pid, "VmRSS")
            body = json.dumps(review(args.hosts, registry_port)).encode()

            peak_fds = [0]
            sampling = threading.Event()

            def sample():
                while not sampling.is_set():
                    peak_fds[0] = max(peak_fds[0], fds(noe.pid))
                    time.sleep(0.02)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            request = urllib.request.Request(
                f"https://127.0.0.1:{webhook}/mutate", data=body,
                headers={"Content-Type": "application/json"})
            started = time.monotonic()
            with urllib.request.urlopen(request, timeout=30, context=context) as response:
                answer = json.loads(response.read())
            took = time.monotonic() - started
            sampling.set()
            sampler.join()
            peak = status(noe.pid, "VmHWM")
            time.sleep(1)
            after = status(noe.pid, "VmRSS")
            allowed = answer.get("response", {}).get("allowed")
            if os.environ.get("SHOW"):  # the whole answer, for debugging
                print(json.dumps(answer)[:1500])
            warnings = answer.get("response", {}).get("warnings") or []
            print(f"| {args.hosts} hosts | {idle / 1024:.1f} | {peak / 1024:.1f} | "
                  f"{(peak - idle) / 1024:.1f} | {after / 1024:.1f} | {peak_fds[0]} | "
                  f"{took:.2f} | allowed={allowed}, {len(warnings)} warnings |")
        finally:
            noe.terminate()
            try:
                noe.wait(timeout=10)
            except subprocess.TimeoutExpired:
                noe.kill()
            stop.set()


if __name__ == "__main__":
    main()
