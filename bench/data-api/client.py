# The Data API's bulk insert and paged read (issue 24), as a backend in Python would call it:
# N objects in insertMany calls of B documents (one urllib connection per call), then every
# object read back with find in pages of 1,000. Usage: client.py URL KEY N B (bench/data-api/run
# starts the server).
import json, os, sys, time, urllib.request
url, key, n, b = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def call(action, body):
    r = urllib.request.Request(f"{url}/api/data/v1/app/item-app-seeds/action/{action}", data=json.dumps(body).encode(),
                               method="POST", headers={"apiKey": key, "Content-Type": "application/json"})
    with urllib.request.urlopen(r) as resp:
        return json.load(resp)
t0 = time.time()
for start in range(0, n, b):
    docs = [{"_id": {"$oid": "%024x" % (0x66 << 88 | i)}, "ownerId": "bench", "itemName": "item %d" % i, "complexity": i % 10}
            for i in range(start, min(n, start + b))]
    call("insertMany", {"class": "Item", "documents": docs})
t1 = time.time()
print("RESULT data_api_insert_rows_per_s=%.0f n=%d batch=%d seconds=%.2f" % (n / (t1 - t0), n, b, t1 - t0))
seen, after, t2 = 0, None, time.time()
while True:
    body = {"class": "Item", "limit": 1000}
    if after: body["after"] = after
    page = call("find", body)
    seen += len(page["documents"])
    after = page.get("next")
    if not after: break
t3 = time.time()
print("RESULT data_api_find_rows_per_s=%.0f rows=%d seconds=%.2f" % (seen / (t3 - t2), seen, t3 - t2))
