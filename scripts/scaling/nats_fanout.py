#!/usr/bin/env python3
"""NATS costs of buzz-relay's bus, measured on the machine's nats-server (NATS_URL, default
nats://127.0.0.1:4222) under the subject prefix `buzzscaling` (nothing else is touched).

Needs `pip install nats-py`. Each run is short; wrap it in `flock /tmp/buzz-bench.lock`:

  flock /tmp/buzz-bench.lock python3 scripts/scaling/nats_fanout.py fanout --gateways 4 --mode wildcard
  flock /tmp/buzz-bench.lock python3 scripts/scaling/nats_fanout.py fanout --gateways 4 --mode interest
  flock /tmp/buzz-bench.lock python3 scripts/scaling/nats_fanout.py request --in-flight 16

fanout: one publisher sends --rate messages/s of --size bytes (a LiveEvent is about 800 bytes) for
--secs seconds to `buzzscaling.v1.live.<community>`, the community drawn at random from
--communities. --gateways subscriber connections play the gateways: `wildcard` = each subscribes
`buzzscaling.v1.live.*` (what every gateway does today, gateway/src/live.rs), `interest` = each
subscribes only the subjects of its 1/G share of the communities (one subscription per community).
request: --in-flight concurrent requesters against one responder in queue group `write` on
`buzzscaling.v1.write` (request 900 bytes, reply 100 bytes), for --secs seconds.

Prints messages published, delivered, lost, and the nats-server's CPU (utime + stime of its
process, from /proc) per published message and per delivered message. The clients run in this
one Python process on the same cores, so throughput ceilings here are the client's, not the
server's: the server CPU per message is the figure to extrapolate from.
"""
import argparse, asyncio, os, random, subprocess, time, uuid

import nats

TCK = os.sysconf("SC_CLK_TCK")


def server_ticks():
    pids = subprocess.run(["pgrep", "-x", "nats-server"], capture_output=True, text=True).stdout.split()
    if len(pids) != 1:
        raise SystemExit(f"expected one nats-server process, found {pids}")
    fields = open(f"/proc/{pids[0]}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


async def fanout(a):
    communities = [str(uuid.UUID(int=random.getrandbits(128))) for _ in range(a.communities)]
    received = [0] * a.gateways
    subs = []
    for g in range(a.gateways):
        nc = await nats.connect(a.url, pending_size=256 * 1024 * 1024)
        subs.append(nc)

        async def cb(msg, g=g):
            received[g] += 1

        if a.mode == "wildcard":
            await nc.subscribe("buzzscaling.v1.live.*", cb=cb, pending_msgs_limit=10_000_000,
                               pending_bytes_limit=2**31)
        else:
            for i, c in enumerate(communities):
                if i % a.gateways == g:
                    await nc.subscribe(f"buzzscaling.v1.live.{c}", cb=cb, pending_msgs_limit=10_000_000,
                                       pending_bytes_limit=2**31)
        await nc.flush()
    pub = await nats.connect(a.url, pending_size=256 * 1024 * 1024)
    payload = b"x" * a.size
    t0, c0 = time.monotonic(), server_ticks()
    sent, batch = 0, max(1, a.rate // 100)
    while time.monotonic() - t0 < a.secs:
        for _ in range(batch):
            await pub.publish(f"buzzscaling.v1.live.{random.choice(communities)}", payload)
        sent += batch
        await pub.flush()
        ahead = sent / a.rate - (time.monotonic() - t0)
        if ahead > 0:
            await asyncio.sleep(ahead)
    elapsed = time.monotonic() - t0
    deadline = time.monotonic() + 10
    expected = sent * a.gateways if a.mode == "wildcard" else sent
    while sum(received) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    cpu = (server_ticks() - c0) / TCK
    delivered = sum(received)
    print(f"fanout mode={a.mode} gateways={a.gateways} communities={a.communities} size={a.size}B "
          f"rate={sent / elapsed:.0f}/s secs={elapsed:.1f} published={sent} delivered={delivered} "
          f"lost={expected - delivered} per-gateway={received} server_cpu={cpu:.2f}s "
          f"= {cpu / sent * 1e6:.1f} us/published, {cpu / max(delivered, 1) * 1e6:.1f} us/delivered, "
          f"{cpu / elapsed * 100:.0f}% of a core")
    for nc in subs + [pub]:
        await nc.close()


async def request(a):
    responder = await nats.connect(a.url)
    reply = b"r" * 100

    async def handle(msg):
        await msg.respond(reply)

    await responder.subscribe("buzzscaling.v1.write", queue="write", cb=handle)
    await responder.flush()
    req = await nats.connect(a.url)
    body = b"q" * 900
    done = 0
    stop = time.monotonic() + a.secs

    async def worker():
        nonlocal done
        while time.monotonic() < stop:
            await req.request("buzzscaling.v1.write", body, timeout=5)
            done += 1

    t0, c0 = time.monotonic(), server_ticks()
    await asyncio.gather(*(worker() for _ in range(a.in_flight)))
    elapsed, cpu = time.monotonic() - t0, (server_ticks() - c0) / TCK
    print(f"request in_flight={a.in_flight} secs={elapsed:.1f} requests={done} ({done / elapsed:.0f}/s, "
          f"client-bound) server_cpu={cpu:.2f}s = {cpu / done * 1e6:.1f} us/request "
          f"(2 messages in, 2 out), {cpu / elapsed * 100:.0f}% of a core")
    await req.close()
    await responder.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["fanout", "request"])
    p.add_argument("--url", default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    p.add_argument("--gateways", type=int, default=4)
    p.add_argument("--mode", choices=["wildcard", "interest"], default="wildcard")
    p.add_argument("--communities", type=int, default=1000)
    p.add_argument("--rate", type=int, default=5000)
    p.add_argument("--size", type=int, default=800)
    p.add_argument("--secs", type=float, default=10)
    p.add_argument("--in-flight", type=int, default=16)
    a = p.parse_args()
    asyncio.run(fanout(a) if a.what == "fanout" else request(a))


if __name__ == "__main__":
    main()
