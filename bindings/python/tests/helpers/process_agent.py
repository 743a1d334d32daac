"""Child process for test_multiprocess.py: opens and closes a database on command.

Reads one command per line on stdin and answers one line on stdout:
  open <path> <synced 0|1>  ->  "ok" or "error <ExceptionClass> <code>"
  write <key>                ->  "ok" (creates an object) or "error ..."
  read <key>                 ->  "found" / "missing" or "error ..."
  begin <key>                ->  "ok": begins a write transaction and creates an object in it
  commit                     ->  "ok" or "error ..."
  close                      ->  "ok"
  exit                       ->  exits 0
"""

import sys

import ferry
from ferry import ObjectSchema, Property, Type

SCHEMA = [ObjectSchema("Note", {"_id": Property(Type.STRING, primary_key=True), "by": Property(Type.STRING)})]


def main() -> None:
    dbs: list[ferry.Database] = []
    for line in sys.stdin:
        cmd, *args = line.split()
        try:
            if cmd == "open":
                dbs.append(ferry.Database.open(args[0], schema=SCHEMA, synced=args[1] == "1"))
                answer = "ok"
            elif cmd == "write":
                with dbs[-1].write():
                    dbs[-1].create("Note", {"_id": args[0], "by": str(sys.argv[1:])})
                answer = "ok"
            elif cmd == "begin":
                dbs[-1].begin_write()
                dbs[-1].create("Note", {"_id": args[0], "by": str(sys.argv[1:])})
                answer = "ok"
            elif cmd == "commit":
                dbs[-1].commit()
                answer = "ok"
            elif cmd == "read":
                answer = "found" if dbs[-1].get("Note", args[0]) is not None else "missing"
            elif cmd == "close":
                while dbs:
                    dbs.pop().close()
                answer = "ok"
            elif cmd == "exit":
                return
            else:
                answer = f"error unknown-command {cmd}"
        except ferry.FerryError as exc:
            answer = f"error {type(exc).__name__} {exc.code} {exc.message}"
        print(answer, flush=True)


if __name__ == "__main__":
    main()
