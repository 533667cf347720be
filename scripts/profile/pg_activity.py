#!/usr/bin/env python3
"""Samples what PostgreSQL's client backends are running (pg_stat_activity) every 20 ms for a
number of seconds and prints, per statement and wait event, the mean number of backends in it.

Usage: pg_activity.py SECONDS OUT_FILE   (connects as postgres@127.0.0.1, database postgres)
"""
import collections
import subprocess
import sys
import time

secs, out_path = float(sys.argv[1]), sys.argv[2]
SQL = (
    "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') || ' | ' || "
    "regexp_replace(left(query, 120), '\\s+', ' ', 'g') FROM pg_stat_activity "
    "WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid(); "
    "SELECT '--end--';\n"
)
seen, samples = collections.Counter(), 0
end = time.time() + secs
with subprocess.Popen(
    ["psql", "-X", "-q", "-At", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
) as p:
    while time.time() < end:
        p.stdin.write(SQL)
        while (line := p.stdout.readline().rstrip("\n")) != "--end--":
            seen[line] += 1
        samples += 1
        time.sleep(0.02)
    p.stdin.close()
with open(out_path, "w") as out:
    out.write(f"{samples} samples; mean active backends per wait event | statement:\n")
    for line, n in seen.most_common(25):
        out.write(f"{n / max(samples, 1):6.2f}  {line}\n")
