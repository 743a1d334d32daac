import FerryCore
@testable import FerryStore
import Testing

/// Write receipts in the store: ids from commits, states from the file, rejections recorded
/// against the transactions that wrote the rejected objects, and their bound.
@Suite struct WriteReceiptTests {
    private func commitItem(_ db: Database, _ n: UInt32) throws -> UInt64 {
        try db.beginWrite()
        try Fixtures.createItem(db, n)
        return try db.commit()
    }

    private func rejection(_ n: UInt32) -> CompensatingWrite {
        .outsideView(objectType: "Item", primaryKey: Fixtures.oid(n))
    }

    @Test func everyCommitHasADistinctReceiptAndAnEmptyOneHasZero() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        let a = try commitItem(db, 1), b = try commitItem(db, 2)
        #expect(a > 0 && b > a)
        try db.beginWrite()
        #expect(try db.commit() == 0)
        #expect(try db.receiptStatus(0).state == .acknowledged)
        // Not synced: nothing ever uploads them.
        #expect(try db.receiptStatus(a).state == .local)
        #expect(throws: FerryError.self) { try db.receiptStatus(b + 1) }
    }

    @Test func statesFollowTheUploadAndTheSettledAcknowledgement() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        let a = try commitItem(db, 1), b = try commitItem(db, 2)
        db.startReceiptSession(acknowledged: 0)
        db.noteReceiptsUploaded(through: b)
        #expect(try db.receiptStatus(a).state == .uploaded)
        // The server acknowledged both, but its answer is not settled yet: still uploaded, so
        // a compensating write that follows never turns an acknowledged receipt rejected.
        try db.integrate([], serverVersion: 1, completesVersion: true, acknowledged: b)
        #expect(try db.receiptStatus(a).state == .uploaded)
        db.noteReceiptsSettled(through: b)
        #expect(try db.receiptStatus(a).state == .acknowledged)
        #expect(try db.receiptStatus(b).state == .acknowledged)
    }

    @Test func aRejectionNamesOnlyTheTransactionsThatWroteTheObject() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        let a = try commitItem(db, 1), b = try commitItem(db, 2), c = try commitItem(db, 3)
        let rejected = try db.recordRejection([rejection(2)], after: 0, through: c)
        #expect(rejected == [b])
        #expect(try db.receiptStatus(b) == ReceiptStatus(receipt: b, state: .rejected, compensatingWrites: [rejection(2)]))
        db.startReceiptSession(acknowledged: 0)
        try db.integrate([], serverVersion: 1, completesVersion: true, acknowledged: c)
        db.noteReceiptsSettled(through: c)
        #expect(try db.receiptStatus(a).state == .acknowledged)
        #expect(try db.receiptStatus(c).state == .acknowledged)
        // Outside the acknowledgement's window nothing is rejected.
        #expect(try db.recordRejection([rejection(1)], after: b, through: c).isEmpty)
    }

    /// What the file has every answer through (`SyncMetadata.answered`, sent in BIND so the
    /// server repeats only refusals the device did not get): an acknowledgement that moves
    /// from A answers through A, a recorded 231 through the acknowledgement it follows.
    @Test func theAnsweredVersionFollowsAcknowledgementsAndRecordedRefusals() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        let a = try commitItem(db, 1), b = try commitItem(db, 2), c = try commitItem(db, 3)
        #expect(try db.syncMetadata().answered == 0)
        try db.integrate([], serverVersion: 1, completesVersion: true, acknowledged: a)
        #expect(try db.syncMetadata().answered == 0, "the answer to the upload through \(a) may still bring a 231")
        try db.integrate([], serverVersion: 2, completesVersion: true, acknowledged: b)
        #expect(try db.syncMetadata().answered == a)
        try db.recordRejection([rejection(2)], after: a, through: b)
        #expect(try db.syncMetadata().answered == b)
        // A download that does not move the acknowledgement leaves it; it never passes the acknowledgement.
        try db.integrate([], serverVersion: 3, completesVersion: true, acknowledged: b)
        #expect(try db.syncMetadata().answered == b)
        try db.recordRejection([rejection(3)], after: b, through: c)
        #expect(try db.syncMetadata().answered == b)
        try db.integrate([], serverVersion: 4, completesVersion: true, acknowledged: c)
        #expect(try db.syncMetadata().answered == b)
    }

    @Test func rejectedReceiptsSurviveAReopen() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/r.ferry"
        var db = try Database.open(DatabaseConfiguration(location: .file(path), schema: Fixtures.itemSchema()), scheduler: try PollingScheduler())
        let a = try commitItem(db, 1)
        try db.recordRejection([rejection(1)], after: 0, through: a)
        db.close()
        db = try Database.open(DatabaseConfiguration(location: .file(path), schema: nil), scheduler: try PollingScheduler())
        defer { db.close() }
        #expect(try db.receiptStatus(a).compensatingWrites == [rejection(1)])
    }

    @Test func theOldestReadRejectionsGoFirstPastTheBound() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        var receipts: [UInt64] = []
        for n in UInt32(1)...3 { receipts.append(try commitItem(db, n)) }
        for (i, r) in receipts.enumerated() { try db.recordRejection([rejection(UInt32(i + 1))], after: r - 1, through: r, bound: 3) }
        // The host reads the second one: it goes before the unread first one.
        #expect(try db.receiptStatus(receipts[1]).state == .rejected)
        let d = try commitItem(db, 4)
        try db.recordRejection([rejection(4)], after: d - 1, through: d, bound: 3)
        #expect(try db.receiptStatus(receipts[0]).state == .rejected)
        #expect(throws: FerryError.self) { try db.receiptStatus(receipts[1]) }
        #expect(try db.receiptStatus(d).state == .rejected)
        // Reading the first and the fourth marked them read too: of those, the oldest goes.
        let e = try commitItem(db, 5)
        try db.recordRejection([rejection(5)], after: e - 1, through: e, bound: 3)
        #expect(throws: FerryError.self) { try db.receiptStatus(receipts[0]) }
        #expect(try db.receiptStatus(receipts[2]).state == .rejected)
    }

    /// A client reset: a transaction whose changes it discarded is rejected with the report's
    /// reason; one it recovered follows the changeset that uploads the recovered changes.
    @Test func aClientResetRejectsDiscardedTransactionsAndRecoveredOnesFollowTheirNewChangeset() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        func server(_ n: UInt32) -> Instruction {
            .create(table: "Item", key: Fixtures.oid(n), fields: [FieldValue(name: "ownerId", value: .string("alice")),
                                                                  FieldValue(name: "complexity", value: .int(1))])
        }
        try db.integrate([server(1), server(2)], serverVersion: 10, completesVersion: true, acknowledged: 0)
        try db.setClientFile(ident: 12, salt: 9)
        let created = try commitItem(db, 8)
        try db.beginWrite()
        try db.set(classIndex: 0, key: Fixtures.oid(2), property: 3, value: .int(9))
        let updated = try db.commit()
        // The server's state no longer has item 2: the update to it is discarded.
        let report = try db.resetToServerState([server(1)], target: Database.ResetTarget(clientFileIdent: 77, clientFileSalt: 5, serverVersion: 40),
                                               recover: true, discardReason: "")
        let discarded = try #require(report.entries.first { $0.primaryKey == Fixtures.oid(2) })
        #expect(discarded.outcome == .discarded)
        #expect(try db.receiptStatus(updated) == ReceiptStatus(receipt: updated, state: .rejected, compensatingWrites: [
            CompensatingWrite(objectType: "Item", primaryKey: Fixtures.oid(2), reason: "discarded by a client reset: \(discarded.reason)"),
        ]))
        // Before the reset the file's acknowledged version moved past it; it is not acknowledged.
        db.startReceiptSession(acknowledged: try db.syncMetadata().acknowledged)
        #expect(try db.receiptStatus(created) == ReceiptStatus(receipt: created, state: .local))
        let recovered = try db.latestLocalVersion()
        #expect(recovered > updated)
        db.noteReceiptsUploaded(through: recovered)
        #expect(try db.receiptStatus(created).state == .uploaded)
        try db.integrate([], serverVersion: 41, completesVersion: true, acknowledged: recovered)
        db.noteReceiptsSettled(through: recovered)
        #expect(try db.receiptStatus(created) == ReceiptStatus(receipt: created, state: .acknowledged))
    }

    @Test func aDamagedRejectionRowIsAnErrorNotATrap() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        let a = try commitItem(db, 1)
        try db.recordRejection([rejection(1)], after: 0, through: a)
        try db.writingStore { c in
            try c.exec("UPDATE __ferry_receipt_rejections SET info = x'05ff'")
            return nil
        }
        #expect(throws: FerryError.self) { try db.receiptStatus(a) }
    }
}
