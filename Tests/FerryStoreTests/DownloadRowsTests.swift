import FerryCore
@testable import FerryStore
import Foundation
import Testing

/// A download integrated from its changesets as the server encoded them (create runs written
/// row by row from the decoder, issue 23) leaves the device exactly as the same download
/// integrated as instructions; a changeset that does not decode integrates nothing.
@Suite("Sync integration: downloads written from their changesets")
struct DownloadRowsTests {
    /// A deterministic generator (the test repeats run to run).
    struct Generator {
        var state: UInt64
        mutating func next(_ n: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(n))
        }
    }

    /// A download of every kind a server sends: runs of creates (fields in several orders and
    /// subsets, one the device does not have), single creates, erases of present and absent
    /// objects, sets and list changes, creates of a class the device does not have.
    static func download(seed: UInt64) -> [Instruction] {
        var g = Generator(state: seed)
        var out: [Instruction] = []
        let fieldSets: [[String]] = [["ownerId", "itemName", "complexity", "tags", "note"], ["complexity", "ownerId"],
                                     ["itemName", "unknownField", "complexity"], []]
        for _ in 0..<400 {
            let key = Fixtures.oid(UInt32(g.next(120)))
            switch g.next(10) {
            case 0...5:
                let fields = fieldSets[g.next(fieldSets.count)].map { name -> FieldValue in
                    switch name {
                    case "ownerId": return FieldValue(name: name, value: .string("user-\(g.next(5))"))
                    case "itemName": return FieldValue(name: name, value: .string("item-\(g.next(1000))"))
                    case "complexity": return FieldValue(name: name, value: .int(Int64(g.next(10))))
                    case "tags": return FieldValue(name: name, value: .list((0..<g.next(3)).map { .string("t\($0)") }))
                    case "note": return FieldValue(name: name, value: g.next(2) == 0 ? .null : .string("n"))
                    default: return FieldValue(name: name, value: .int(1))
                    }
                }
                // Runs: the same field set several times in a row.
                for n in 0..<(1 + g.next(4)) {
                    out.append(.create(table: "Item", key: Fixtures.oid(UInt32(g.next(120) + n)), fields: fields))
                }
                _ = key
            case 6: out.append(.erase(table: "Item", key: key))
            case 7: out.append(.set(table: "Item", key: key, field: "complexity", value: .int(Int64(g.next(10)))))
            case 8: out.append(.listInsert(table: "Item", key: key, field: "tags", index: 0, value: .string("x")))
            default: out.append(.create(table: "Ghost", key: .string("g\(g.next(10))"), fields: [FieldValue(name: "a", value: .int(1))]))
            }
        }
        return out
    }

    static func everything(_ db: Database) throws -> [[FerryValue]?] {
        try (0..<130).map { try db.object(classIndex: 0, key: Fixtures.oid(UInt32($0))) }
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func theSameDownloadLeavesTheSameObjects(seed: UInt64) throws {
        let viaInstructions = try Fixtures.memory()
        let viaChangesets = try Fixtures.memory()
        defer { viaInstructions.close(); viaChangesets.close() }
        // Two downloads, the second over what the first left, each cut into a few changesets.
        for (version, part) in [(1 as UInt64, seed), (2, seed &+ 100)] {
            let instructions = Self.download(seed: part)
            let cuts = [0, instructions.count / 3, instructions.count * 2 / 3, instructions.count]
            let changesets = (0..<3).map {
                ChangesetCodec.encode(Changeset(timestamp: 0, instructions: Array(instructions[cuts[$0]..<cuts[$0 + 1]])))
            }
            try viaInstructions.integrate(instructions, serverVersion: version, completesVersion: true, acknowledged: 0)
            _ = try viaChangesets.integrate(changesets: changesets, serverVersion: version, completesVersion: true, acknowledged: 0,
                                            capturingWritesAfter: nil)
        }
        let expected = try Self.everything(viaInstructions)
        #expect(expected.contains { $0 != nil }, "the download created objects")
        #expect(try Self.everything(viaChangesets) == expected)
        #expect(try viaChangesets.syncMetadata().serverVersion == 2)
    }

    @Test func aChangesetThatDoesNotDecodeIntegratesNothingOfItsDownload() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        let good = ChangesetCodec.encode(Changeset(timestamp: 0, instructions: [
            .create(table: "Item", key: Fixtures.oid(1), fields: [FieldValue(name: "complexity", value: .int(3))]),
            .create(table: "Item", key: Fixtures.oid(2), fields: [FieldValue(name: "complexity", value: .int(4))]),
        ]))
        let truncated = Array(good.dropLast(3))
        #expect(throws: MalformedDownload.self) {
            try db.integrate(changesets: [good, truncated], serverVersion: 1, completesVersion: true, acknowledged: 0, capturingWritesAfter: nil)
        }
        #expect(try db.object(classIndex: 0, key: Fixtures.oid(1)) == nil)
        #expect(try db.syncMetadata().serverVersion == 0)
        // A value of the wrong type is the device refusing the data, not a malformed message.
        let wrongType = ChangesetCodec.encode(Changeset(timestamp: 0, instructions: [
            .create(table: "Item", key: Fixtures.oid(3), fields: [FieldValue(name: "complexity", value: .string("three"))]),
        ]))
        do {
            _ = try db.integrate(changesets: [wrongType], serverVersion: 1, completesVersion: true, acknowledged: 0, capturingWritesAfter: nil)
            Issue.record("a value of the wrong type was stored")
        } catch let e as FerryError {
            #expect(e.code == .wrongType)
        }
        #expect(try db.object(classIndex: 0, key: Fixtures.oid(3)) == nil)
    }

    /// With an observer the download is decoded into instructions first: the observer hears
    /// of every object.
    @Test func anObservedDatabaseIsToldOfEveryObject() throws {
        let poll = try PollingScheduler()
        let db = try Fixtures.memory(scheduler: poll)
        defer { db.close() }
        let seen = Collector()
        let token = try db.observeQuery(classIndex: 0, query: "TRUEPREDICATE", arguments: [], callback: seen.add)
        defer { token.cancel() }
        let instructions: [Instruction] = (1...20).map {
            .create(table: "Item", key: Fixtures.oid(UInt32($0)), fields: [FieldValue(name: "complexity", value: .int(1))])
        }
        _ = try db.integrate(changesets: [ChangesetCodec.encode(Changeset(timestamp: 0, instructions: instructions))],
                             serverVersion: 1, completesVersion: true, acknowledged: 0, capturingWritesAfter: nil)
        #expect(poll.deliver() == 1)
        #expect(Set(seen.all.flatMap(\.inserted)) == Set((1...20).map { Fixtures.oid(UInt32($0)) }))
    }
}
