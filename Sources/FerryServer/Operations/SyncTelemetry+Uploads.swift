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
        // Only the first `maxUploadLines` lines are kept; the others are only counted (a bulk
        // upload has one line per object: building them all cost 7% of its integration).
        var lines: [(version: UInt64, table: String, operation: String, key: FerryValue, count: Int)] = []
        var lineCount = 0
        var last: (version: UInt64, table: String, operation: String, key: FerryValue)? = nil
        var undecodable: [StoredJSON] = []
        for d in changesets {
            switch d.changeset {
            case .failure(let e):
                undecodable.append(.object([("client_version", .int(Int64(clamping: d.upload.clientVersion))), ("error", .string(excerpt(e.description)))]))
            case .success(let c):
                let v = d.upload.clientVersion
                for i in c.instructions {
                    let op = Self.operation(i)
                    if let l = last, l.version == v, l.operation == op, l.key == i.key, l.table == i.table {
                        if lineCount <= Self.maxUploadLines { lines[lines.count - 1].count += 1 }
                        continue
                    }
                    last = (v, i.table, op, i.key)
                    lineCount += 1
                    if lineCount <= Self.maxUploadLines { lines.append((v, i.table, op, i.key, 1)) }
                }
            }
        }
        var summary: [StoredJSON] = lines.map {
            .object([("client_version", .int(Int64(clamping: $0.version))), ("object_type", .string(excerpt($0.table))), ("operation", .string($0.operation)),
                     ("primary_key", .string(excerpt($0.key.keyText))), ("count", .int(Int64($0.count)))])
        }
        summary += undecodable.prefix(10)
        let instructions = changesets.reduce(0) { n, d in if case .success(let c) = d.changeset { return n + c.instructions.count } else { return n } }
        log.record(.upload, userId: outbox.userId, connection: outbox.id,
                   "upload of \(changesets.count) changeset(s), \(instructions) instruction(s) in session \(session)",
                   details: [("session", .int(Int64(clamping: session))), ("changesets", .array(summary)),
                             ("lines_omitted", .int(Int64(max(0, lineCount - Self.maxUploadLines))))])
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
                              ("rule", .string(rule.rawValue)), ("role", CompensatingWriteRule.role(of: cw).map(StoredJSON.string) ?? .null)])
    }
}
