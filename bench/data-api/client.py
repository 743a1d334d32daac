# The backend path's figures (issue 24), as a backend in Python measures them (urllib, one
# connection per call; bench/data-api/run starts the server):
# 1. N objects in insertMany calls of B documents, then every object read back with find in
#    pages of 1,000 (data_api_insert_rows_per_s, data_api_find_rows_per_s).
# 2. Triggers: the server's trigger on Item POSTs every one of those inserts to this script's
#    receiver. The receiver refuses the first one, so the trigger (max_failures 1) pauses and
#    the insert and find are measured alone; then it is resumed (admin API) and delivers the
#    backlog: the throughput from the resume to the Nth delivery (trigger_deliveries_per_s).
# 3. The change feed's lag: 300 single inserts, one at a time, each timed from its answer to
#    its event on an SSE stream (change_feed_lag_ms p50/p99; an idle server, not under load).
# Usage: client.py URL KEY N B HOOK_PORT ADMIN_TOKEN
import http.server, json, sys, threading, time, urllib.request
url, key, n, b, hook_port, admin = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]

deliveries = {"count": 0, "first": None, "last": None, "refusing": False}
done = threading.Condition()
class Hook(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with done:
            refused = deliveries["refusing"]
            if not refused:
                now = time.time()
                deliveries["count"] += 1
                deliveries["first"] = deliveries["first"] or now
                deliveries["last"] = now
            done.notify_all()
        self.send_response(503 if refused else 204)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args): pass
hook = http.server.ThreadingHTTPServer(("127.0.0.1", hook_port), Hook)
threading.Thread(target=hook.serve_forever, daemon=True).start()

def call(action, body):
    r = urllib.request.Request(f"{url}/api/data/v1/app/item-app-seeds/action/{action}", data=json.dumps(body).encode(),
                               method="POST", headers={"apiKey": key, "Content-Type": "application/json"})
    with urllib.request.urlopen(r) as resp:
        return json.load(resp)

def admin_triggers_started():
    # The trigger starts at the head when a node first takes it: wait for that (the admin API
    # needs a token, so look at the first delivery of a probe instead).
    probe = {"_id": {"$oid": "%024x" % (0x65 << 88)}, "ownerId": "bench", "itemName": "probe", "complexity": 0}
    deadline = time.time() + 60
    while time.time() < deadline:
        call("insertOne", {"class": "Item", "document": probe})
        with done:
            if done.wait_for(lambda: deliveries["count"] > 0, timeout=1):
                return
    sys.exit("the trigger delivered nothing within 60 s")
admin_triggers_started()
with done:
    deliveries.update(count=0, first=None, last=None, refusing=True)

t0 = time.time()
for start in range(0, n, b):
    docs = [{"_id": {"$oid": "%024x" % (0x66 << 88 | i)}, "ownerId": "bench", "itemName": "item %d" % i, "complexity": i % 10}
            for i in range(start, min(n, start + b))]
    call("insertMany", {"class": "Item", "documents": docs})
t1 = time.time()
print("RESULT data_api_insert_rows_per_s=%.0f n=%d batch=%d seconds=%.2f" % (n / (t1 - t0), n, b, t1 - t0), flush=True)
seen, after, t2 = 0, None, time.time()
while True:
    body = {"class": "Item", "limit": 1000}
    if after: body["after"] = after
    page = call("find", body)
    seen += len(page["documents"])
    after = page.get("next")
    if not after: break
t3 = time.time()
print("RESULT data_api_find_rows_per_s=%.0f rows=%d seconds=%.2f" % (seen / (t3 - t2), seen, t3 - t2), flush=True)
with done:
    deliveries["refusing"] = False
resume = urllib.request.Request(f"{url}/api/admin/v1/triggers/items/resume", method="POST", headers={"Authorization": f"Bearer {admin}"})
t4 = time.time()
urllib.request.urlopen(resume).read()
with done:
    done.wait_for(lambda: deliveries["count"] >= n, timeout=600)
    got, last = deliveries["count"], deliveries["last"]
if got < n:
    print("RESULT trigger_deliveries_per_s=unmeasured delivered=%d of %d within 600 s" % (got, n))
else:
    print("RESULT trigger_deliveries_per_s=%.0f delivered=%d seconds=%.2f (a backlog of %d, from the resume to the last)"
          % (got / max(last - t4, 1e-9), got, last - t4, n), flush=True)

# The change feed's lag: an SSE stream from the head, single inserts one at a time.
head = call("insertOne", {"class": "Item", "document": {"_id": {"$oid": "%024x" % (0x67 << 88)}, "ownerId": "bench", "itemName": "head", "complexity": 0}})["version"]
arrived, cond = {}, threading.Condition()
def follow():
    r = urllib.request.Request(f"{url}/api/data/v1/app/item-app-seeds/changes?after={head}&classes=Item",
                               headers={"apiKey": key, "Accept": "text/event-stream"})
    with urllib.request.urlopen(r) as stream:
        for line in stream:
            if line.startswith(b"id: "):
                with cond:
                    arrived[int(line[4:])] = time.time()
                    cond.notify_all()
threading.Thread(target=follow, daemon=True).start()
lags = []
for i in range(300):
    doc = {"_id": {"$oid": "%024x" % (0x68 << 88 | i)}, "ownerId": "bench", "itemName": "lag %d" % i, "complexity": 1}
    v = call("insertOne", {"class": "Item", "document": doc})["version"]
    answered = time.time()
    with cond:
        if not cond.wait_for(lambda: v in arrived, timeout=30):
            sys.exit(f"version {v} never reached the change feed")
        lags.append(max(0.0, arrived[v] - answered) * 1000)
lags.sort()
print("RESULT change_feed_lag_ms p50=%.2f p99=%.2f n=%d (from the write's answer to its SSE event; an idle server)"
      % (lags[len(lags) // 2], lags[int(len(lags) * 0.99) - 1], len(lags)), flush=True)
