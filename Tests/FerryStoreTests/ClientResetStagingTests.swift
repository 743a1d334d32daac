import FerryCore
@testable import FerryStore
import Testing

/// A client reset's fresh download staged in the file (issue 13, point 5): the sync engine
/// appends each downloaded message to `__ferry_reset_download` as it arrives, and the reset
/// reads it back one changeset at a time, so its memory follows one message, not the state.
@Suite("Client reset: the staged download")
struct ClientResetStagingTests {
    static let complexity = 3
    static let target = Database.ResetTarget(clientFileIdent: 77, clientFileSalt: 5, serverVersion: 40)

    func server(_ n: UInt32, complexity: Int64) -> Instruction {
        .create(table: "Item", key: Fixtures.oid(n), fields: [
            FieldValue(name: "ownerId", value: .string("alice")), FieldValue(name: "itemName", value: .string("item-\(n)")),
            FieldValue(name: "complexity", value: .int(complexity)), FieldValue(name: "tags", value: .list([])),
            FieldValue(name: "note", value: .null),
        ])
    }

    func encoded(_ instructions: [Instruction]) -> [UInt8] {
        ChangesetCodec.encode(Changeset(timestamp: 0, instructions: instructions))
    }

    func write(_ db: Database, _ body: () throws -> Void) throws {
        try db.beginWrite()
        try body()
        try db.commit()
    }

    /// Every Item on the device: complexity by key.
    func items(_ db: Database) throws -> [FerryValue: FerryValue] {
        var out: [FerryValue: FerryValue] = [:]
        for row in try db.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []) { out[row[0]] = row[Self.complexity] }
        return out
    }

    @Test func aDownloadOfManyMessagesIsAppliedOneChangesetAtATime() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        // The device synced items 1...3 and 50...52; it then created 99 and updated 1 offline.
        try db.integrate([1, 2, 3, 50, 51, 52].map { server($0, complexity: 1) }, serverVersion: 10, completesVersion: true, acknowledged: 0)
        try db.setClientFile(ident: 12, salt: 9)
        try write(db) {
            try Fixtures.createItem(db, 99, complexity: 4)
            try db.set(classIndex: 0, key: Fixtures.oid(1), property: Self.complexity, value: .int(8))
        }

        // The server's state arrives in ten messages of four objects (items 1...40); message 5
        // erases item 6 (of message 1), and item 9 is erased and created again. The oracle is
        // the same instructions applied to a dictionary.
        var messages: [[Instruction]] = []
        for m in 0..<10 {
            var message: [Instruction] = []
            for k in 1...4 {
                let n = m * 4 + k
                message.append(server(UInt32(n), complexity: Int64(100 + n)))
            }
            messages.append(message)
        }
        messages[5].append(.erase(table: "Item", key: Fixtures.oid(6)))
        messages[6].append(.erase(table: "Item", key: Fixtures.oid(9)))
        messages[7].append(server(9, complexity: 7))
        var oracle: [FerryValue: FerryValue] = [:]
        for i in messages.joined() {
            switch i {
            case let .create(_, key, fields): oracle[key] = fields.first { $0.name == "complexity" }?.value
            case let .erase(_, key): oracle[key] = nil
            default: Issue.record("unexpected \(i)")
            }
        }
        for (n, m) in messages.enumerated() {
            try db.stageResetDownload([encoded(m)])
            #expect(try db.stagedResetChangesetCount() == n + 1)
        }
        // Staging writes nothing the host can see.
        #expect(try items(db).count == 7)

        let report = try db.resetToServerState(target: Self.target, recover: true, discardReason: "")
        #expect(try db.stagedResetChangesetCount() == 0)
        var expected = oracle
        expected[Fixtures.oid(99)] = .int(4) // created offline: recovered
        expected[Fixtures.oid(1)] = .int(8) // the device's update wins
        #expect(try items(db) == expected)
        #expect(try items(db)[Fixtures.oid(50)] == nil) // gone from the server
        #expect(try items(db)[Fixtures.oid(9)] == .int(7))
        #expect(report.entries.map(\.primaryKey) == [Fixtures.oid(99), Fixtures.oid(1)])
        #expect(report.entries.allSatisfy { $0.outcome == .recovered })
        // At most one message's instructions were held at once, not the 43 of the download.
        #expect(db.lastResetPeakInstructions == 5)
        #expect(try db.syncMetadata().clientFileIdent == 77)
    }

    @Test func aFailedResetChangesNothingAndKeepsTheStagedDownloadForTheNextAttempt() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        try db.integrate([server(1, complexity: 1)], serverVersion: 10, completesVersion: true, acknowledged: 0)
        try db.setClientFile(ident: 12, salt: 9)
        let bad: Instruction = .create(table: "Item", key: Fixtures.oid(3), fields: [FieldValue(name: "complexity", value: .string("high"))])
        try db.stageResetDownload([encoded([server(2, complexity: 2)])])
        try db.stageResetDownload([encoded([bad])])
        #expect { try db.resetToServerState(target: Self.target, recover: true, discardReason: "") } throws: { error in
            (error as? FerryError)?.code == .schemaMismatch
        }
        // Rolled back: item 2 of the first message is not there, item 1 still is.
        #expect(try items(db) == [Fixtures.oid(1): .int(1)])
        #expect(try db.syncMetadata().clientFileIdent == 12)
        #expect(try db.stagedResetChangesetCount() == 2)
        try db.clearStagedResetDownload()
        #expect(try db.stagedResetChangesetCount() == 0)
    }

    @Test func aCorruptStagedChangesetIsAnErrorNotACrash() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        try db.integrate([server(1, complexity: 1)], serverVersion: 10, completesVersion: true, acknowledged: 0)
        try db.stageResetDownload([encoded([server(2, complexity: 2)]), [1, 0xFF, 0xFF, 0xFF], []])
        #expect { try db.resetToServerState(target: Self.target, recover: false, discardReason: "") } throws: { error in
            (error as? FerryError)?.code == .corrupt
        }
        #expect(try items(db) == [Fixtures.oid(1): .int(1)])
        // A fresh download's instructions other than whole objects and erases are refused too.
        try db.clearStagedResetDownload()
        try db.stageResetDownload([encoded([.set(table: "Item", key: Fixtures.oid(1), field: "complexity", value: .int(5))])])
        #expect { try db.resetToServerState(target: Self.target, recover: false, discardReason: "") } throws: { error in
            (error as? FerryError)?.code == .corrupt
        }
        #expect(try items(db) == [Fixtures.oid(1): .int(1)])
    }

    @Test func clearingIsHarmlessWithNothingStaged() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        // The table does not exist until something is staged.
        #expect(try db.stagedResetChangesetCount() == 0)
        try db.clearStagedResetDownload()
        // A reset with nothing staged: the server's state is empty.
        try db.integrate([server(1, complexity: 1)], serverVersion: 10, completesVersion: true, acknowledged: 0)
        try db.resetToServerState(target: Self.target, recover: true, discardReason: "")
        #expect(try items(db).isEmpty)
    }

    @Test func observersSeeWhatAStagedResetChanged() throws {
        let scheduler = try PollingScheduler()
        let db = try Fixtures.memory(scheduler: scheduler)
        defer { db.close() }
        try db.integrate((1...3).map { server($0, complexity: 1) }, serverVersion: 10, completesVersion: true, acknowledged: 0)
        let seen = Collector()
        let token = try db.observeQuery(classIndex: 0, query: "TRUEPREDICATE", arguments: [], callback: seen.add)
        defer { token.cancel() }
        _ = scheduler.deliver()
        try db.stageResetDownload([encoded([server(1, complexity: 1)])])
        try db.stageResetDownload([encoded([server(3, complexity: 7), server(4, complexity: 1)])])
        try db.resetToServerState(target: Self.target, recover: true, discardReason: "")
        _ = scheduler.deliver()
        #expect(seen.all.last?.deleted == [Fixtures.oid(2)])
        #expect(seen.all.last?.modified == [Fixtures.oid(3)])
        #expect(seen.all.last?.inserted == [Fixtures.oid(4)])
        // An object the reset overwrote with the server's is reported whole, as before staging.
        #expect(seen.all.last?.modifiedProperties == [1, 2, 3, 4, 5])
    }
}
