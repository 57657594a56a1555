#!/usr/bin/env python3
"""Every metric the chart's alerts and dashboard use is one noe exposes and documents.

usage: check_monitoring.py RULES.yaml DASHBOARD.json SCRAPE.txt NOE_HELP.txt

- RULES.yaml: the PrometheusRule's groups (rendered by monitoring.sh); DASHBOARD.json: the
  dashboard the ConfigMap carries; SCRAPE.txt: /metrics of a started noe after the local trial's
  admissions (scripts/try.sh, NOE_TRY_METRICS); NOE_HELP.txt: `noe --help` of that binary.
- A metric must be in the scrape, or in NOT_IN_A_PLAIN_START (metrics of modes a plain start on
  loopback does not reach), which are then found registered in crates/*/src instead.
- Every metric must be in the metrics table of docs/configuration.md.
- The gate's metrics are checked only once the binary has --lookup-mode: before that they are
  listed as pending, never passed.
Prints "ok - ..." / "not ok - ..." lines and "CHECKS <passed> <failed>" last.
"""
import json
import pathlib
import re
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]

# Metrics a plain `noe` start on loopback (the local trial) does not expose, and why.
NOT_IN_A_PLAIN_START = {
    "noe_registry_throttled_total": "a registry answering 429/5xx, or the client-side rate limit",
    "noe_registry_circuit_opened_total": "a registry answering 429 or a run of 5xx",
    "noe_registry_shared_cache_reads_total": "--shared-cache",
    "noe_controller_events_total": "the controllers (a cluster)",
    "noe_controller_leader": "the controllers (a cluster)",
    "noe_controller_pods_misplaced_total": "the controllers (a cluster)",
    "noe_pods_deletion_total": "--remediate=evict (a cluster)",
    "noe_exec_format_errors_total": "--detect-exec-format-errors (a cluster)",
    "noe_learned_corrections": "--detect-exec-format-errors (a cluster)",
    "noe_gated_pods": "--lookup-mode gate|hybrid (a cluster)",
    "noe_gate_oldest_seconds": "--lookup-mode gate|hybrid (a cluster)",
    "noe_gate_duration_seconds": "--lookup-mode gate|hybrid (a cluster)",
    "noe_gate_releases_total": "--lookup-mode gate|hybrid (a cluster)",
    "noe_gate_queue_full_total": "--lookup-mode gate|hybrid (a cluster)",
    "noe_gate_queued": "--lookup-mode gate|hybrid (a cluster)",
}
GATE = {m for m in NOT_IN_A_PLAIN_START if m.startswith(("noe_gate_", "noe_gated_"))}
METRIC = re.compile(r"\b((?:noe|process)_[a-z0-9_]+)\b")
SUFFIXES = ("_bucket", "_count", "_sum")

passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok - {name}")
    else:
        failed += 1
        print(f"not ok - {name}" + (f": {detail}" if detail else ""))


def exprs_of_rules(path):
    groups = yaml.safe_load(open(path))["groups"]
    return {r["alert"]: r["expr"] for g in groups for r in g["rules"]}


def exprs_of_dashboard(path):
    out = {}
    for panel in json.load(open(path))["panels"]:
        for target in panel.get("targets", []):
            out[f"panel {panel['title']!r} {target['refId']}"] = target["expr"]
    return out


def scraped(path):
    """name -> type, from the scrape's # TYPE lines."""
    types = {}
    for line in open(path):
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
    return types


def documented():
    """name -> type, from the metrics table of docs/configuration.md."""
    text = (ROOT / "docs/configuration.md").read_text()
    rows = re.findall(r"^\| `((?:noe|process)_[a-z0-9_]+)(?:\{[^}]*\})?` \| (\w+) \|", text, re.M)
    return dict(rows)


def registered_in_source(name):
    for path in (ROOT / "crates").glob("*/src/**/*.rs"):
        if f'"{name}"' in path.read_text(errors="replace"):
            return True
    return False


def base(name, types):
    """The family of a histogram's _bucket/_count/_sum series."""
    for suffix in SUFFIXES:
        stem = name[: -len(suffix)]
        if name.endswith(suffix) and (types.get(stem) == "histogram"
                                      or stem in NOT_IN_A_PLAIN_START):
            return stem
    return name


def main():
    rules, dashboard, scrape, help_text = sys.argv[1:5]
    exprs = {**{f"alert {k}": v for k, v in exprs_of_rules(rules).items()},
             **exprs_of_dashboard(dashboard)}
    exposed = scraped(scrape)
    docs = documented()
    types = {**docs, **exposed}
    gate_mode = "--lookup-mode" in open(help_text).read()
    check("the scrape has noe's metrics", "noe_webhook_request_duration_seconds" in exposed,
          f"{sorted(exposed)[:5]}")
    users = {}
    for where, expr in exprs.items():
        for token in METRIC.findall(expr):
            users.setdefault(base(token, types), []).append(where)
    check("the alerts and panels use metrics", len(users) >= 15, str(sorted(users)))
    pending = []
    for metric, where in sorted(users.items()):
        if metric in GATE and not gate_mode:
            pending.append(metric)
            continue
        if metric in exposed:
            check(f"{metric} is exposed by a started noe (scrape)", True)
        elif metric in NOT_IN_A_PLAIN_START:
            check(f"{metric} ({NOT_IN_A_PLAIN_START[metric]}) is registered in crates/*/src",
                  registered_in_source(metric), f"used by {where[0]}")
        else:
            check(f"{metric} is exposed by a started noe", False,
                  f"not in the scrape, used by {', '.join(where)}")
        check(f"{metric} is documented in docs/configuration.md (Metrics)", metric in docs,
              f"used by {', '.join(where)}")
    if pending:
        print(f"# pending until the binary has --lookup-mode: {', '.join(pending)}")
    print(f"CHECKS {passed} {failed}")


if __name__ == "__main__":
    main()
