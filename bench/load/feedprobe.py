# The Data API change feed's lag under load (issue 24; bench/load/run's active scenario): a
# backend follows the feed as Server-Sent Events from the start while the pairs write, and
# inserts one object of its own every 100 ms through the Data API; each is timed from the
# insert's answer to its event on the stream. Also counts every event the stream carried
# (the devices' writes among them). Prints "feed_lag_p50_ms=… feed_lag_p99_ms=… …" once
# SECONDS passed. Standard library only.
# Usage: feedprobe.py FEED_URL WRITE_URL KEY SECONDS
import json, sys, threading, time, urllib.request
feed_url, write_url, key, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
app = "item-app-seeds"
arrived, answered, lock = {}, {}, threading.Lock()
events = {"count": 0}

def follow():
    request = urllib.request.Request(f"{feed_url}/api/data/v1/app/{app}/changes?after=0", headers={"apiKey": key, "Accept": "text/event-stream"})
    with urllib.request.urlopen(request) as stream:
        for line in stream:
            if not line.startswith(b"data:"):
                continue
            now = time.monotonic()
            event = json.loads(line[5:])
            events["count"] += 1
            pk = event.get("primaryKey")
            if isinstance(pk, dict) and pk.get("$oid", "").startswith("fe"):
                with lock:
                    arrived.setdefault(pk["$oid"], now)
threading.Thread(target=follow, daemon=True).start()

def insert(oid):
    body = json.dumps({"class": "Item", "document": {"_id": {"$oid": oid}, "ownerId": "feed-probe", "itemName": "probe", "complexity": 0}}).encode()
    request = urllib.request.Request(f"{write_url}/api/data/v1/app/{app}/action/insertOne", data=body, method="POST",
                                     headers={"apiKey": key, "Content-Type": "application/json"})
    with urllib.request.urlopen(request) as r:
        r.read()

start = time.monotonic()
n = 0
while time.monotonic() - start < seconds:
    oid = "fe%022x" % n   # the probe's own ids: "fe" then a counter
    insert(oid)
    with lock:
        answered[oid] = time.monotonic()
    n += 1
    time.sleep(max(0.0, start + n * 0.1 - time.monotonic()))
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    with lock:
        if all(o in arrived for o in answered):
            break
    time.sleep(0.05)
with lock:
    lags = sorted(max(0.0, arrived[o] - answered[o]) * 1000 for o in answered if o in arrived)
    missing = sum(1 for o in answered if o not in arrived)
def pct(p):
    return lags[min(len(lags) - 1, int(len(lags) * p))] if lags else float("nan")
print(f"feed_lag_p50_ms={pct(0.5):.2f} feed_lag_p99_ms={pct(0.99):.2f} feed_probes={len(answered)} feed_probes_missing={missing} feed_events={events['count']}")
