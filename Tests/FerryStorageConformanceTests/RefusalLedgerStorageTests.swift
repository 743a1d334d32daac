import FerryCore
import FerrySyncStorage
import Testing

/// The refusals a client file was sent (`RefusalLedger`) are durable with the acknowledgement
/// they follow, in the same transaction: a refusal whose answer a device lost is sent again at
/// its next BIND, even after the server restarted.
@Suite("Storage: refusal ledgers")
struct RefusalLedgerStorageTests {
    static func refused(_ n: Int) -> CompensatingWrite {
        CompensatingWrite(objectType: "Item", primaryKey: .string("k\(n)"), reason: "write not allowed (\(n))")
    }

    @Test(arguments: Backend.all)
    func refusalsAreKeptWithTheAcknowledgementAcrossAReopen(_ backend: Backend) async throws {
        try await backend.withPlace { place in
            let (file, other) = try await place.withOpen { store in
                let s = store.storage
                let file = try await s.newClientFile(userId: "u1"), other = try await s.newClientFile(userId: "u1")
                #expect(try await s.clientFile(file.ident)?.refusals == RefusalLedger())
                // Two uploads in one transaction (a group commit), the second reading the first's.
                try await s.writeTransaction { tx in
                    _ = try await tx.write(objects: [:], clientFile: file.ident, clientVersion: 3)
                    try await tx.recordRefusals(clientFile: file.ident, through: 3, writes: [Self.refused(1)])
                    _ = try await tx.write(objects: [:], clientFile: file.ident, clientVersion: 5)
                    try await tx.recordRefusals(clientFile: file.ident, through: 5, writes: [Self.refused(2), Self.refused(3)])
                    #expect(try await tx.clientFile(file.ident)?.refusals.records.map(\.through) == [3, 5])
                    // A file the store does not have is left alone.
                    try await tx.recordRefusals(clientFile: file.ident + other.ident + 99, through: 1, writes: [Self.refused(9)])
                }
                return (file.ident, other.ident)
            }
            try await place.withOpen { store in
                let record = try #require(try await store.storage.clientFile(file))
                #expect(record.acknowledgedClientVersion == 5)
                #expect(try record.refusals.records == [RefusalLedger.Record(through: 3, writes: [Self.refused(1)]),
                                                    RefusalLedger.Record(through: 5, writes: [Self.refused(2), Self.refused(3)])])
                #expect(try record.refusals.toRepeat(answeredThrough: 3, acknowledged: record.acknowledgedClientVersion) == [Self.refused(2), Self.refused(3)])
                #expect(try await store.storage.clientFile(other)?.refusals.isEmpty == true)
            }
        }
    }

    /// A BIND that says the device has every answer through a version drops the records
    /// through it; none left is stored as none.
    @Test(arguments: Backend.all)
    func answeredRefusalsAreForgotten(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            try await s.writeTransaction { tx in
                _ = try await tx.write(objects: [:], clientFile: file.ident, clientVersion: 5)
                try await tx.recordRefusals(clientFile: file.ident, through: 3, writes: [Self.refused(1)])
                try await tx.recordRefusals(clientFile: file.ident, through: 5, writes: [Self.refused(2)])
            }
            try await s.forgetAnsweredRefusals(clientFile: file.ident, answeredThrough: 2)
            #expect(try await s.clientFile(file.ident)?.refusals.records.map(\.through) == [3, 5])
            try await s.forgetAnsweredRefusals(clientFile: file.ident, answeredThrough: 4)
            #expect(try await s.clientFile(file.ident)?.refusals.records == [RefusalLedger.Record(through: 5, writes: [Self.refused(2)])])
            try await s.forgetAnsweredRefusals(clientFile: file.ident, answeredThrough: 5)
            #expect(try await s.clientFile(file.ident)?.refusals == RefusalLedger())
            // Nothing to forget, and a file the store does not have: no change, no error.
            try await s.forgetAnsweredRefusals(clientFile: file.ident, answeredThrough: 9)
            try await s.forgetAnsweredRefusals(clientFile: file.ident + 99, answeredThrough: 9)
            #expect(try await s.clientFile(file.ident)?.acknowledgedClientVersion == 5)
        }
    }

    /// A client file is read by every upload; its ledger is decoded only when asked, so damaged
    /// bytes fail only what needs them (a BIND logs and drops them; an upload with refusals
    /// starts a new ledger), never the device's sync.
    @Test func aDamagedLedgerIsDecodedOnlyWhenAsked() throws {
        var record = ClientFileRecord(ident: 1, salt: 2, userId: "u1", acknowledgedClientVersion: 0, subscriptionVersion: 0, subscriptions: [])
        #expect(try record.refusals == RefusalLedger())
        var ledger = RefusalLedger()
        ledger.record(through: 3, writes: [Self.refused(1)])
        record.refusalBytes = ledger.encoded
        #expect(try record.refusals == ledger && record.refusalsToExtend == ledger)
        record.refusalBytes = [1, 0, 9, 9]
        #expect(throws: (any Error).self) { try record.refusals }
        #expect(record.refusalsToExtend == RefusalLedger())
    }

    @Test(arguments: Backend.all)
    func aFailedTransactionKeepsNoRefusal(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            struct Stop: Error {}
            await #expect(throws: Stop.self) {
                try await s.writeTransaction { tx in
                    _ = try await tx.write(objects: [:], clientFile: file.ident, clientVersion: 2)
                    try await tx.recordRefusals(clientFile: file.ident, through: 2, writes: [Self.refused(1)])
                    throw Stop()
                }
            }
            let record = try #require(try await s.clientFile(file.ident))
            #expect(try record.acknowledgedClientVersion == 0 && record.refusals.isEmpty)
        }
    }
}
