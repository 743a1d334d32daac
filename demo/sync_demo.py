#!/usr/bin/env python3
"""The seeds' scenario, the Python device: the same user as the C device on another device.

    sync_demo.py BASE_URL DEVICE_DIR EMAIL

Logs in with email/password, subscribes to `complexity <= 4`, downloads what the C device
wrote (printing the change notification as the items arrive), writes an item of its own and
waits until the server has it. scripts/demo.sh runs it between the two halves of the C device.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if "FERRY_LIBRARY" not in os.environ and (REPO / "build" / "libferry.so").exists():
    os.environ["FERRY_LIBRARY"] = str(REPO / "build" / "libferry.so")
try:
    import ferry
except ImportError:
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    import ferry

from ferry import ObjectSchema, Property, Type

ITEM = ObjectSchema(
    "Item",
    {
        "_id": Property(Type.OBJECT_ID, primary_key=True),
        "ownerId": Property(Type.STRING),
        "itemName": Property(Type.STRING),
        "complexity": Property(Type.INT, indexed=True),
    },
)
T = 30


def main() -> int:
    base_url, device_dir, email = sys.argv[1:4]
    Path(device_dir).mkdir(parents=True, exist_ok=True)
    with ferry.App(app_id="item-app-seeds", base_url=base_url, base_directory=device_dir) as app:
        app.on_sync_error = lambda session, error: print(f"   sync error {error.code}: {error.message}")
        user = app.log_in(ferry.Credentials.email_password(email, "correct horse battery"), timeout=T)
        print(f"   Python device: user {user.id} (logged in with email/password: the same user)")
        session = app.open_synced(user, str(Path(device_dir) / "items.ferry"), schema=[ITEM])
        db = session.database
        arrived = threading.Event()
        seen: list[ferry.ChangeSet] = []

        def on_change(changes: ferry.ChangeSet) -> None:
            # Ferry's loop thread, right after a download was integrated.
            seen.append(changes)
            if changes.inserted:
                arrived.set()

        token = db.observe_query("Item", "complexity <= 4", callback=on_change)
        version = session.update_subscriptions(lambda s: s.add("simple-items", "Item", "complexity <= 4"))
        session.wait_for_subscriptions(version, timeout=T)
        print(f"   subscribed: simple-items = Item where complexity <= 4 (version {version}, complete)")
        if not arrived.wait(T):
            print("   ERROR: no notification for the downloaded items", file=sys.stderr)
            return 1
        inserted = sum(len(c.inserted) for c in seen)
        print(f"   change notification: {inserted} item(s) arrived from the server:")
        for item in db.query("Item", "TRUEPREDICATE SORT(itemName ASC)"):
            print(f"     {item['_id']}  {item['itemName']:<24} complexity {item['complexity']}")
        with db.write():
            db.create("Item", {"_id": ferry.ObjectId.generate(), "ownerId": user.id,
                               "itemName": "Buy groceries", "complexity": 2})
        print("   wrote 'Buy groceries' (complexity 2) locally")
        session.wait_for_upload(timeout=T)
        print("   the server acknowledged the upload")
        token.close()
        session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
