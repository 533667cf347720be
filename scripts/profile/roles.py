#!/usr/bin/env python3
"""CPU share of each role from `perf report --sort pid,comm` lines on stdin.

Usage: roles.py SECONDS 'LABEL=tid,tid,...' ...
Threads named in a LABEL's list count for that label; then every postgres process (backends and
background writers) is "PostgreSQL", nats-server "NATS", redis-server "Redis", the idle task
"idle", and anything else "other" (builds, other databases).
"""
import re
import sys

secs = sys.argv[1]
labelled = []
for arg in sys.argv[2:]:
    label, _, tids = arg.partition("=")
    labelled.append((label, set(tids.split(","))))
BY_COMM = {"postgres": "PostgreSQL", "nats-server": "NATS", "redis-server": "Redis", "swapper": "idle"}
roles = {}
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+(\d+):(\S+)", line)
    if not m:
        continue
    pct, pid, comm = float(m.group(1)), m.group(2), m.group(3)
    role = next((label for label, tids in labelled if pid in tids), None) or BY_COMM.get(comm, "other")
    roles[role] = roles.get(role, 0) + pct
print(f"=== CPU by role (share of the whole machine, {secs} s sampled)")
for role, pct in sorted(roles.items(), key=lambda kv: -kv[1]):
    print(f"  {pct:6.2f} %  {role}")
