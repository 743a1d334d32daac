import FerryCore
import FerrySQLite

/// The fresh download of a client reset, staged in the file while it arrives: one row per
/// changeset of each DOWNLOAD message, in arrival order, in the internal table
/// `__ferry_reset_download`. A reset's download is the whole state of the file's
/// subscriptions; staging it on disk, and reading it back one changeset at a time, keeps the
/// client's memory at one message's worth however large that state is. The table is created
/// when first needed, so files that never reset do not have it.
enum ResetDownloadStaging {
    static let createSQL = "CREATE TABLE IF NOT EXISTS __ferry_reset_download (seq INTEGER PRIMARY KEY, changeset BLOB NOT NULL)"

    static func exists(_ c: SQLiteConnection) throws -> Bool {
        let s = try c.statement("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__ferry_reset_download'")
        defer { s.resetKeepingBindings() }
        return try s.step()
    }

    /// How many changesets are staged (0 without the table).
    static func count(_ c: SQLiteConnection) throws -> Int {
        guard try exists(c) else { return 0 }
        let s = try c.statement("SELECT COUNT(*) FROM __ferry_reset_download")
        defer { s.resetKeepingBindings() }
        _ = try s.step()
        return Int(s.int64(0))
    }

    /// Calls `body` with the instructions of each staged changeset, oldest first, one
    /// changeset at a time: only one is ever decoded (held) at once. Returns the largest number
    /// of instructions held at once. A row that does not decode is an error (the file was
    /// damaged, or written by something else), never a trap.
    static func forEachChangeset(_ c: SQLiteConnection, _ body: ([Instruction]) throws -> Void) throws -> Int {
        guard try exists(c) else { return 0 }
        // One row per query, by key: no statement stays open over the table while `body`
        // writes to the class tables on the same connection.
        let s = try c.statement("SELECT seq, changeset FROM __ferry_reset_download WHERE seq > ? ORDER BY seq LIMIT 1")
        var after = Int64.min
        var peak = 0
        while true {
            s.bind(1, after)
            guard try s.step() else {
                s.resetKeepingBindings()
                return peak
            }
            after = s.int64(0)
            let bytes = s.blob(1)
            s.resetKeepingBindings()
            let instructions: [Instruction]
            do { instructions = try ChangesetCodec.decode(bytes).instructions } catch {
                throw FerryError(.corrupt, "staged changeset \(after) of the client reset's download does not decode: \(error)")
            }
            peak = max(peak, instructions.count)
            try body(instructions)
        }
    }
}
