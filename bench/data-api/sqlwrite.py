# A backend's SQL write to a device's notification (issue 24), on PostgreSQL: a device (the
# Python binding over libferry.so) subscribes to its user's items and observes them; the
# backend (psycopg, autocommit) updates one of them N times, one at a time, each timed from
# just before its UPDATE to the device's notification of that value
# (sql_write_to_device_ms p50/p99). bench/data-api/run starts the server.
# Usage: sqlwrite.py SERVER_URL DATABASE_URL N WORK_DIR
import statistics, sys, threading, time
from pathlib import Path
url, database_url, n, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bindings" / "python"))
import ferry, psycopg

item = ferry.ObjectSchema("Item", {
    "_id": ferry.Property(ferry.Type.OBJECT_ID, primary_key=True),
    "ownerId": ferry.Property(ferry.Type.STRING),
    "itemName": ferry.Property(ferry.Type.STRING),
    "complexity": ferry.Property(ferry.Type.INT, indexed=True),
})
app = ferry.App(app_id="item-app-seeds", base_url=url, base_directory=str(work))
user = app.log_in(ferry.Credentials.anonymous(), timeout=60)
session = app.open_synced(user, str(work / "device.ferry"), schema=[item])
db = session.database
version = session.update_subscriptions(lambda s: s.add("mine", "Item", f'ownerId == "{user.id}"'))
session.wait_for_subscriptions(version, timeout=60)

oid = ferry.ObjectId.generate()
sql = psycopg.connect(database_url, autocommit=True)
seen = threading.Condition()
state = {"changes": 0}
def changed(_change):
    with seen:
        state["changes"] += 1
        seen.notify_all()
token = db.observe_object("Item", oid, callback=changed)
sql.execute('INSERT INTO ferry_data."Item" ("_id", "ownerId", "itemName", complexity) VALUES (%s, %s, %s, 0)', (str(oid), user.id, "start"))
def name_on_device():
    o = db.get("Item", oid)
    return None if o is None else o["itemName"]
def wait_for(name):
    with seen:
        if not seen.wait_for(lambda: name_on_device() == name, timeout=30):
            sys.exit(f"the device did not receive {name!r} within 30 s")
wait_for("start")
times = []
for i in range(n):
    name = f"v{i}"
    start = time.perf_counter()
    sql.execute('UPDATE ferry_data."Item" SET "itemName" = %s WHERE "_id" = %s', (name, str(oid)))
    wait_for(name)
    times.append((time.perf_counter() - start) * 1000)
times.sort()
print(f"RESULT sql_write_to_device_ms_p50={statistics.median(times):.2f}")
print(f"RESULT sql_write_to_device_ms_p99={times[max(0, int(len(times) * 0.99) - 1)]:.2f}")
token.close()
session.close()
app.close()
