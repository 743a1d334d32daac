import FerryCore
import FerrySQLite

/// The history as a host reads it (F-DB: one changeset per committed write transaction): its
/// size, its changesets, and a check that it replays to the data (local databases).
extension Database {
    public func historyCount() throws -> UInt64 {
        try reading { c in
            let s = try c.statement("SELECT COUNT(*) FROM __ferry_history")
            defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
            _ = try s.step()
            return UInt64(max(0, s.int64(0)))
        }
    }

    /// Every changeset in the history, oldest first.
    public func history() throws -> [Changeset] {
        try reading { c in
            let s = try c.statement("SELECT changeset FROM __ferry_history ORDER BY version")
            defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
            var out: [Changeset] = []
            while try s.step() { out.append(try ChangesetCodec.decode(s.blob(0))) }
            return out
        }
    }

    /// Replays the history into an empty in-memory database of the file's stored schema and
    /// compares every object with the data (values by their encoding, so NaN equals NaN).
    public func verifyHistory() throws {
        guard !storeForSync.isSynced else {
            throw FerryError(.invalidArgument, "history verification is for local databases: a synced database's data holds downloads its history does not have")
        }
        let changesets = try history()
        let stored = storeForSync.storedSchema
        let replay = try Store(location: .memory(identifier: "__verify-\(UInt64.random(in: 0...UInt64.max))"), schema: stored, synced: false)
        defer { replay.close() }
        try replay.writer.exec("BEGIN")
        for (n, cs) in changesets.enumerated() {
            for instruction in cs.instructions {
                do { try replay.apply(instruction, on: replay.writer) } catch let e as FerryError {
                    throw FerryError(.corrupt, "history changeset \(n + 1) does not apply: \(e.message)")
                }
            }
        }
        try replay.writer.exec("COMMIT")
        for (ci, os) in stored.classes.enumerated() {
            let layout = TableLayout(os, classIndex: ci)
            let actual = try reading { try storeForSync.allRows($0, layout) }
            let expected = try replay.allRows(replay.writer, layout)
            let pk = os.primaryKeyIndex
            func encoded(_ rows: [[FerryValue]]) -> [FerryValue: [[UInt8]]] {
                Dictionary(rows.map { ($0[pk], $0.map { ValueCodec.encode($0) }) }, uniquingKeysWith: { x, _ in x })
            }
            let a = encoded(actual), e = encoded(expected)
            for (key, row) in a where e[key] != row {
                throw FerryError(.corrupt, e[key] == nil
                    ? "object \(key.debugText) of class '\(os.name)' is in the data but not in the history"
                    : "object \(key.debugText) of class '\(os.name)' differs from its history")
            }
            for key in e.keys where a[key] == nil {
                throw FerryError(.corrupt, "object \(key.debugText) of class '\(os.name)' is in the history but not in the data")
            }
        }
    }
}
