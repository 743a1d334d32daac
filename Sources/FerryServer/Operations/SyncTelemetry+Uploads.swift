import FerryCore

/// What an upload reports: its summary in the sync log, and the compensating writes.
extension SyncTelemetry {
    /// The most summary lines an upload's log entry keeps.
    static let maxUploadLines = 200

    /// An UPLOAD arrived: its changesets, summarised per changeset and object: one line per
    /// run of instructions on one object with one operation (client version, object type,
    /// operation, primary key, count).
    func uploadReceived(_ outbox: ConnectionOutbox, session: UInt64, _ changesets: [UploadIntegration.Decoded]) {
        metrics.uploadReceived(changesets: changesets.count)
        guard let log else { return }
        let summary = UploadSummary(changesets, maxLines: Self.maxUploadLines)
        var json: [JSON] = summary.lines.map {
            .object([("client_version", .int(Int64(clamping: $0.version))), ("object_type", .string(excerpt($0.table))), ("operation", .string($0.operation)),
                     ("primary_key", .string(excerpt($0.key.keyText))), ("count", .int(Int64($0.count)))])
        }
        json += summary.undecodable.prefix(10).map {
            .object([("client_version", .int(Int64(clamping: $0.version))), ("error", .string(excerpt($0.error)))])
        }
        log.record(.upload, userId: outbox.userId, connection: outbox.id,
                   "upload of \(changesets.count) changeset(s), \(summary.instructions) instruction(s) in session \(session)",
                   details: [("session", .int(Int64(clamping: session))), ("changesets", .array(json)),
                             ("lines_omitted", .int(Int64(summary.omitted)))])
    }

    /// The sync log's summary of one upload: one line per run of instructions on one object
    /// with one operation (client version, object type, operation, primary key, count). Only
    /// the first `maxLines` lines are kept and the others counted: a bulk upload has a line per
    /// object, and building them all (with each key formatted as text) cost 7% of its
    /// integration (issue 23).
    struct UploadSummary {
        struct Line: Equatable {
            var version: UInt64
            var table: String
            var operation: String
            var key: FerryValue
            var count: Int
        }
        private(set) var lines: [Line] = []
        /// Lines past `maxLines`, counted only.
        private(set) var omitted = 0
        private(set) var undecodable: [(version: UInt64, error: String)] = []
        private(set) var instructions = 0

        init(_ changesets: [UploadIntegration.Decoded], maxLines: Int) {
            var lineCount = 0
            var last: Line? = nil
            for d in changesets {
                switch d.changeset {
                case .failure(let e):
                    undecodable.append((d.upload.clientVersion, e.description))
                case .success(let c):
                    let v = d.upload.clientVersion
                    instructions += c.instructions.count
                    for i in c.instructions {
                        let op = SyncTelemetry.operation(i)
                        if let l = last, l.version == v, l.operation == op, l.key == i.key, l.table == i.table {
                            if lineCount <= maxLines { lines[lines.count - 1].count += 1 }
                            continue
                        }
                        let line = Line(version: v, table: i.table, operation: op, key: i.key, count: 1)
                        last = line
                        lineCount += 1
                        if lineCount <= maxLines { lines.append(line) }
                    }
                }
            }
            omitted = max(0, lineCount - maxLines)
        }
    }

    static func operation(_ i: Instruction) -> String {
        switch i {
        case .create: "create"
        case .erase: "erase"
        case .set, .addInteger: "update"
        case .listInsert, .listSet, .listErase, .listClear: "list_update"
        }
    }

    func compensatingWrite(_ outbox: ConnectionOutbox, _ cw: CompensatingWrite) {
        let rule = CompensatingWriteRule(cw)
        metrics.compensatingWrite(rule)
        log?.record(.compensatingWrite, userId: outbox.userId, connection: outbox.id, cw.reason,
                    details: [("object_type", .string(excerpt(cw.objectType))), ("primary_key", .string(excerpt(cw.primaryKey.keyText))),
                              ("reason", .string(excerpt(cw.reason, limit: ServerEventLog.maxMessageBytes))),
                              ("rule", .string(rule.rawValue)), ("role", CompensatingWriteRule.role(of: cw).map(JSON.string) ?? .null)])
    }
}
