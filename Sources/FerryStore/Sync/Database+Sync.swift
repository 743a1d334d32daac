import FerryCore
import FerrySQLite

/// A synced file's sync state, kept in the file itself so it survives restarts and crashes
/// together with the data it describes.
package struct SyncMetadata: Sendable, Equatable {
    /// The server's identity for this file (0 until the server assigned one).
    package var clientFileIdent: UInt64 = 0
    package var clientFileSalt: UInt64 = 0
    /// The last server version integrated here.
    package var serverVersion: UInt64 = 0
    /// The last local version (history version) the server made durable.
    package var acknowledged: UInt64 = 0
    /// The last local version whose answer is complete here, compensating writes (error 231)
    /// included: a download that moves the acknowledgement from A moves it to A (a 231 for
    /// the upload through A came before), a recorded 231 to the acknowledgement it followed.
    /// A file from before it was kept reads its acknowledgement. Never above `acknowledged`.
    package var answered: UInt64 = 0
}

/// A local changeset waiting for upload.
package struct PendingChangeset: Sendable {
    package var version: UInt64
    /// The server version the change was made on (what the device had integrated then).
    package var base: UInt64
    package var bytes: [UInt8]
}

/// The sync engine's access to a database: its metadata, the local changes to upload, and
/// the integration of downloaded objects. Downloaded changes are not written to the history
/// (they are not the device's to upload) but fire notifications like local commits.
extension Database {
    private static let metaKeys = ["sync.ident", "sync.salt", "sync.server_version", "sync.acknowledged"]

    package func syncMetadata() throws -> SyncMetadata {
        try readingStore { c in
            var m = SyncMetadata()
            var answered: UInt64?
            let s = try c.statement("SELECT key, value FROM __ferry_meta WHERE key LIKE 'sync.%'")
            defer { s.resetKeepingBindings() }
            while try s.step() {
                let v = UInt64(bitPattern: s.int64(1))
                switch s.string(0) {
                case "sync.ident": m.clientFileIdent = v
                case "sync.salt": m.clientFileSalt = v
                case "sync.server_version": m.serverVersion = v
                case "sync.acknowledged": m.acknowledged = v
                case "sync.answered": answered = v
                default: break
                }
            }
            m.answered = min(answered ?? m.acknowledged, m.acknowledged)
            return m
        }
    }

    /// Stores the identity the server gave this file.
    package func setClientFile(ident: UInt64, salt: UInt64) throws {
        try writingStore { c in
            try Self.putMeta(c, "sync.ident", ident)
            try Self.putMeta(c, "sync.salt", salt)
            return nil
        }
    }

    /// A value kept for the sync engine in the file (e.g. the subscription sets), by key.
    package func syncValue(_ key: String) throws -> [UInt8]? {
        try readingStore { c in
            let s = try c.statement("SELECT value FROM __ferry_meta WHERE key = ?")
            defer { s.resetKeepingBindings() }
            s.bind(1, "sync.value." + key)
            return try s.step() && !s.isNull(0) ? s.blob(0) : nil
        }
    }

    package func setSyncValue(_ key: String, _ value: [UInt8]) throws {
        try writingStore { c in
            let s = try c.statement("INSERT OR REPLACE INTO __ferry_meta (key, value) VALUES (?, ?)")
            defer { s.resetKeepingBindings() }
            s.bind(1, "sync.value." + key); s.bind(2, blob: value)
            try s.run()
            return nil
        }
    }

    /// The local changesets after `version`, oldest first, up to about `maxBytes` (at least one).
    package func pendingChangesets(after version: UInt64, maxBytes: Int = 1 << 20) throws -> [PendingChangeset] {
        try readingStore { c in
            // The base of a changeset is the server version of the last integration before
            // its commit (an indexed lookup per changeset).
            let s = try c.statement("""
                SELECT h.version, h.changeset,
                       (SELECT b.server_version FROM __ferry_sync_bases b WHERE b.history_version < h.version
                        ORDER BY b.history_version DESC LIMIT 1)
                FROM __ferry_history h WHERE h.version > ? ORDER BY h.version
                """)
            defer { s.resetKeepingBindings() }
            s.bind(1, Int64(bitPattern: version))
            var out: [PendingChangeset] = []
            var total = 0
            while try s.step() {
                let bytes = s.blob(1)
                out.append(PendingChangeset(version: UInt64(bitPattern: s.int64(0)), base: s.isNull(2) ? 0 : UInt64(bitPattern: s.int64(2)), bytes: bytes))
                total += bytes.count
                if total >= maxBytes { break }
            }
            return out
        }
    }

    /// The versions and byte sizes of the local changesets after `version`, oldest first (the
    /// upload progress counts them without reading them).
    package func pendingChangesetSizes(after version: UInt64) throws -> [(version: UInt64, bytes: UInt64)] {
        try readingStore { c in
            let s = try c.statement("SELECT version, length(changeset) FROM __ferry_history WHERE version > ? ORDER BY version")
            defer { s.resetKeepingBindings() }
            s.bind(1, Int64(bitPattern: version))
            var out: [(version: UInt64, bytes: UInt64)] = []
            while try s.step() { out.append((UInt64(bitPattern: s.int64(0)), UInt64(bitPattern: s.int64(1)))) }
            return out
        }
    }

    /// The newest local version (0 when nothing was ever written).
    package func latestLocalVersion() throws -> UInt64 {
        try readingStore { c in
            let s = try c.statement("SELECT COALESCE(MAX(version), 0) FROM __ferry_history")
            defer { s.resetKeepingBindings() }
            _ = try s.step()
            return UInt64(bitPattern: s.int64(0))
        }
    }

    /// Integrates one download in one transaction: `objects` are whole objects (creates carry
    /// every property) and erases from the server. Local changes not yet acknowledged are
    /// applied again on top of the objects they touch, so the device keeps showing them until
    /// the server's merged result comes back. Then records the acknowledgement, and the server
    /// version when `completesVersion` (the last message of a batch: a partial bootstrap must
    /// not claim the version). Returns the number of instructions integrated.
    @discardableResult
    package func integrate(_ objects: [Instruction], serverVersion: UInt64, completesVersion: Bool, acknowledged: UInt64) throws -> Int {
        _ = try integrate(objects, serverVersion: serverVersion, completesVersion: completesVersion, acknowledged: acknowledged, capturingWritesAfter: nil)
        return objects.count
    }

    /// `integrate`, also capturing (SPEC F-NOLOSS) every object of the download that the
    /// device wrote after local version `floor` and that the download left different from
    /// what the device had: its state before and after, and those writes. A revert of a
    /// compensating write is such a download; the sync session keeps the captures until the
    /// error 231 that follows it says which objects were reverted.
    package func integrate(_ objects: [Instruction], serverVersion: UInt64, completesVersion: Bool, acknowledged: UInt64,
                          capturingWritesAfter floor: UInt64?) throws -> [RevertCapture] {
        try integrate(.decoded(objects), serverVersion: serverVersion, completesVersion: completesVersion, acknowledged: acknowledged,
                      capturingWritesAfter: floor)
    }

    /// `integrate` of a download's changesets as the server encoded them. When nothing needs
    /// the download as instructions (no local change to apply again, no write to capture, no
    /// observer), create runs go from the decoder straight into rows, with no `Instruction`
    /// per object (issue 23: a bootstrap's integration spent a quarter of its time building and
    /// dropping them); otherwise they are decoded first. A changeset that does not decode
    /// throws `MalformedDownload` and nothing of the download is integrated.
    /// `answeredThrough`: when the download moves the acknowledgement, the version through which
    /// the answers are complete, if less than the acknowledgement before it (`UploadWindow`: a
    /// connection's first acknowledgement of a file lacking answers), kept as
    /// `SyncMetadata.answered` in the same transaction.
    package func integrate(changesets: [[UInt8]], serverVersion: UInt64, completesVersion: Bool, acknowledged: UInt64,
                          capturingWritesAfter floor: UInt64?, answeredThrough: UInt64? = nil) throws -> [RevertCapture] {
        try integrate(.encoded(changesets), serverVersion: serverVersion, completesVersion: completesVersion, acknowledged: acknowledged,
                      capturingWritesAfter: floor, answeredThrough: answeredThrough)
    }

    /// A download as instructions, or as the changesets that hold them.
    private enum DownloadSource {
        case decoded([Instruction])
        case encoded([[UInt8]])

        var instructions: [Instruction] {
            get throws {
                switch self {
                case .decoded(let objects): return objects
                case .encoded(let changesets):
                    var out: [Instruction] = []
                    for c in changesets {
                        do { out += try ChangesetCodec.decode(c).instructions } catch { throw MalformedDownload(reason: "\(error)") }
                    }
                    return out
                }
            }
        }
    }

    private func integrate(_ source: DownloadSource, serverVersion: UInt64, completesVersion: Bool, acknowledged: UInt64,
                           capturingWritesAfter floor: UInt64?, answeredThrough: UInt64? = nil) throws -> [RevertCapture] {
        var captures: [RevertCapture] = []
        try writingStore { c in
            let store = self.storeForSync
            let latest = try Self.latestVersion(c)
            let observed = store.hasObservers
            let encoded: Bool
            if case .encoded = source { encoded = true } else { encoded = false }
            // What to do is decided from values (`DownloadPlan`: its rules); this carries it out.
            let plan = DownloadPlan.make(stored: try Self.getMeta(c, "sync.acknowledged"), acknowledged: acknowledged, latestLocal: latest,
                                         encoded: encoded, observed: observed, captureFloor: floor,
                                         answeredThrough: answeredThrough, serverVersion: serverVersion, completesVersion: completesVersion)
            var touched: Set<ObjectKey> = []
            var classes: [String: Int] = [:]
            var applied: [Instruction] = []
            let rebase = plan.rebaseAfter != nil
            // The device's recent writes by object, and the states before the download of the
            // objects it touches that have some (read once, before their first instruction).
            var recent: [ObjectKey: [LocalWrite]] = [:]
            var before: [(ObjectKey, Int, [FerryValue]?)] = []
            var seen: Set<ObjectKey> = []
            var positions = FieldPositions()
            let objects: [Instruction]
            if plan.rowsFromDecoder, case .encoded(let changesets) = source {
                for changeset in changesets { try Self.integrateRows(changeset, into: store, on: c, classes: &classes) }
                objects = []
            } else {
                objects = try source.instructions
            }
            // Every download until the acknowledgement moves again reads the last acknowledged
            // upload, unless its history is too large (`DownloadPlan.captureStart`).
            if let floor = plan.captureAfter, !objects.isEmpty,
               let start = plan.captureStart(historyBytes: plan.narrowCaptureTo == nil ? 0 : try Self.historyBytes(c, after: floor)) {
                let s = try c.statement("SELECT version, changeset FROM __ferry_history WHERE version > ? ORDER BY version")
                s.bind(1, Int64(bitPattern: start))
                while try s.step() {
                    let v = UInt64(bitPattern: s.int64(0))
                    // The device's own history: undecodable, the file is damaged (not skipped:
                    // the reverts it would capture would be wrong).
                    for i in try ChangesetCodec.decode(s.blob(1)).instructions {
                        recent[ObjectKey(table: i.table, key: i.key), default: []].append(LocalWrite(version: v, instruction: i))
                    }
                }
                s.resetKeepingBindings()
            }
            for i in objects {
                let ci: Int
                if let known = classes[i.table] { ci = known } else {
                    guard let found = store.schema.classIndex(named: i.table) else { continue } // a class this device does not have
                    classes[i.table] = found
                    ci = found
                }
                if !recent.isEmpty {
                    let ref = ObjectKey(table: i.table, key: i.key)
                    if recent[ref] != nil, seen.insert(ref).inserted { before.append((ref, ci, try store.readRow(c, ci, key: i.key))) }
                }
                guard try store.applyServerInstruction(i, classIndex: ci, on: c, positions: &positions) else { continue }
                if rebase { touched.insert(ObjectKey(table: i.table, key: i.key)) }
                if observed { applied.append(i) }
            }
            if let after = plan.rebaseAfter, !touched.isEmpty {
                let s = try c.statement("SELECT changeset FROM __ferry_history WHERE version > ? ORDER BY version")
                s.bind(1, Int64(bitPattern: after))
                var local: [Instruction] = []
                while try s.step() { local += try ChangesetCodec.decode(s.blob(0)).instructions }
                s.resetKeepingBindings()
                for i in DownloadPlan.rebase(local, touched: touched) {
                    // A local change that no longer applies (its object erased by the server)
                    // is dropped here; the server decides its fate when it is uploaded.
                    if case .create = i, let ci = store.schema.classIndex(named: i.table), try store.readRow(c, ci, key: i.key) != nil {
                        continue
                    }
                    // One that does not fit any more (its list shrank, its object is gone) is
                    // dropped; a failure to write it (I/O) fails the download, which is
                    // integrated again, so no local write is lost silently.
                    if try store.applyIfItFits(i, on: c), observed { applied.append(i) }
                }
            }
            for (ref, ci, was) in before {
                let now = try store.readRow(c, ci, key: ref.key)
                guard now != was else { continue }
                captures.append(RevertCapture(objectSchema: store.layout(ci).objectSchema, primaryKey: ref.key, before: was, after: now,
                                              writes: recent[ref] ?? []))
            }
            let ack = plan.acknowledged
            try Self.putMeta(c, "sync.acknowledged", ack)
            if let answered = plan.answered { try Self.putMeta(c, "sync.answered", answered) }
            if let serverVersion = plan.serverVersion {
                try Self.putMeta(c, "sync.server_version", serverVersion)
                let h = try c.statement("INSERT OR REPLACE INTO __ferry_sync_bases (history_version, server_version) VALUES (?, ?)")
                h.bind(1, Int64(bitPattern: latest)); h.bind(2, Int64(bitPattern: serverVersion))
                try h.run()
                h.resetKeepingBindings()
                // Only the bases of changesets not yet acknowledged are needed: keep the last
                // row at or before the acknowledged version and everything after it.
                let prune = try c.statement("""
                    DELETE FROM __ferry_sync_bases WHERE history_version <
                      (SELECT MAX(history_version) FROM __ferry_sync_bases WHERE history_version <= ?)
                    """)
                prune.bind(1, Int64(bitPattern: ack))
                try prune.run()
                prune.resetKeepingBindings()
            }
            return applied.isEmpty ? nil : applied
        }
        return captures
    }

    static func historyBytes(_ c: SQLiteConnection, after version: UInt64) throws -> Int64 {
        let s = try c.statement("SELECT COALESCE(SUM(length(changeset)), 0) FROM __ferry_history WHERE version > ?")
        defer { s.resetKeepingBindings() }
        s.bind(1, Int64(bitPattern: version))
        _ = try s.step()
        return s.int64(0)
    }

    static func latestVersion(_ c: SQLiteConnection) throws -> UInt64 {
        let s = try c.statement("SELECT COALESCE(MAX(version), 0) FROM __ferry_history")
        defer { s.resetKeepingBindings() }
        _ = try s.step()
        return UInt64(bitPattern: s.int64(0))
    }

    static func getMeta(_ c: SQLiteConnection, _ key: String) throws -> UInt64 {
        let s = try c.statement("SELECT value FROM __ferry_meta WHERE key = ?")
        defer { s.resetKeepingBindings() }
        s.bind(1, key)
        return try s.step() ? UInt64(bitPattern: s.int64(0)) : 0
    }

    static func putMeta(_ c: SQLiteConnection, _ key: String, _ value: UInt64) throws {
        let s = try c.statement("INSERT OR REPLACE INTO __ferry_meta (key, value) VALUES (?, ?)")
        defer { s.resetKeepingBindings() }
        s.bind(1, key); s.bind(2, Int64(bitPattern: value))
        try s.run()
    }
}

/// A download whose changesets do not decode: the server broke the protocol (the session
/// ends with error 212); nothing of the download was integrated.
package struct MalformedDownload: Error, CustomStringConvertible {
    package let reason: String
    package var description: String { "a malformed changeset: \(reason)" }
}

extension Database {
    /// Writes one downloaded changeset's objects: create runs row by row from the decoder,
    /// anything else as `integrate` applies a server instruction.
    fileprivate static func integrateRows(_ changeset: [UInt8], into store: Store, on c: SQLiteConnection, classes: inout [String: Int]) throws {
        var runClass: Int? = nil
        var runPositions: [Int?] = []
        func classIndex(_ table: String) -> Int? {
            if let known = classes[table] { return known }
            guard let found = store.schema.classIndex(named: table) else { return nil } // a class this device does not have
            classes[table] = found
            return found
        }
        // The writes' own errors (a wrong type, I/O) are carried out of the decoder as they are;
        // only the decoder's are a malformed download.
        struct WriteFailure: Error { let error: any Error }
        func writing(_ body: () throws -> Void) throws {
            do { try body() } catch { throw WriteFailure(error: error) }
        }
        do {
            try ChangesetCodec.forEach(changeset, run: { table, fields in
                runClass = classIndex(table)
                if let ci = runClass {
                    let os = store.layout(ci).objectSchema
                    runPositions = fields.map { os.propertyIndex(named: $0) }
                }
            }, row: { key, values in
                guard let ci = runClass else { return }
                try writing {
                    let row = try store.rowFromServer(ci, key: key, count: values.count, positions: runPositions) { values[$0] }
                    try store.upsertRow(c, ci, row)
                }
            }, instruction: { i in
                guard let ci = classIndex(i.table) else { return }
                var positions = FieldPositions()
                try writing { try store.applyServerInstruction(i, classIndex: ci, on: c, positions: &positions) }
            })
        } catch let failure as WriteFailure {
            throw failure.error
        } catch {
            throw MalformedDownload(reason: "\(error)")
        }
    }
}

extension Store {
    /// Applies one server instruction that is not part of a create run (see `integrate`);
    /// returns whether it changed anything.
    @discardableResult
    func applyServerInstruction(_ i: Instruction, classIndex ci: Int, on c: SQLiteConnection, positions: inout FieldPositions) throws -> Bool {
        switch i {
        case let .create(_, key, fields):
            try upsertRow(c, ci, try rowFromServer(ci, key: key, fields: fields, positions: &positions))
            return true
        case let .erase(_, key):
            return try deleteRowIfExists(c, ci, key: key)
        default:
            // A server instruction that does not fit this device's data (a property it
            // does not have) is dropped; a failure to write it (I/O) fails the download.
            if try readRow(c, ci, key: i.key) != nil { _ = try applyIfItFits(i, on: c) }
            return true
        }
    }

    /// The row of a whole object the server sent. The server's values are checked like the
    /// host's: a value of the wrong type would otherwise be stored and break later reads.
    func rowFromServer(_ ci: Int, key: FerryValue, fields: [FieldValue]) throws -> [FerryValue] {
        var positions = FieldPositions()
        return try rowFromServer(ci, key: key, fields: fields, positions: &positions)
    }

    /// `rowFromServer`, finding the fields' properties through `positions` (the last field
    /// list's, reused while creates name the same fields in the same order, as a bootstrap's
    /// do: one name lookup per field per download, not per object).
    func rowFromServer(_ ci: Int, key: FerryValue, fields: [FieldValue], positions: inout FieldPositions) throws -> [FerryValue] {
        let found = positions.of(fields, classIndex: ci, in: layout(ci).objectSchema)
        return try rowFromServer(ci, key: key, count: fields.count, positions: found) { fields[$0].value }
    }

    /// The row of an object whose `count` field values are `value(n)`, for the properties at
    /// `positions[n]` (nil: a property this device does not have).
    func rowFromServer(_ ci: Int, key: FerryValue, count: Int, positions found: [Int?], value: (Int) -> FerryValue) throws -> [FerryValue] {
        let layout = layout(ci)
        let os = layout.objectSchema
        var values = layout.defaults
        try os.primaryKey.validateElement(key, className: os.name)
        values[layout.primaryKeyIndex] = key
        for n in 0..<count {
            guard let p = found[n], p != layout.primaryKeyIndex else { continue }
            let property = os.properties[p]
            let v = value(n)
            if property.isList {
                guard case .list(let items) = v else {
                    throw FerryError(.wrongType, "the server sent a non-list value for list '\(os.name).\(property.name)'")
                }
                for item in items { try property.validateElement(item, className: os.name) }
            } else {
                try property.validateElement(v, className: os.name)
            }
            values[p] = v
        }
        return values
    }
}

/// The property index of each field of the last field list seen (see `rowFromServer`).
struct FieldPositions {
    private var classIndex = -1
    private var names: [String] = []
    private var positions: [Int?] = []

    mutating func of(_ fields: [FieldValue], classIndex ci: Int, in os: ObjectSchema) -> [Int?] {
        if ci == classIndex, names.count == fields.count, zip(names, fields).allSatisfy({ $0 == $1.name }) { return positions }
        classIndex = ci
        names = fields.map(\.name)
        positions = fields.map { os.propertyIndex(named: $0.name) }
        return positions
    }
}

/// The owner of one sync write transaction (the store's write lock is held per owner).
final class SyncWriter: Sendable {}
