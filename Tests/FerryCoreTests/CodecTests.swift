import FerryTestSupport
import Testing
@testable import FerryCore

@Suite("Binary codecs: round trips and hostile input")
struct CodecTests {
    static let sampleValues: [FerryValue] = [
        .null, .bool(true), .bool(false), .int(0), .int(-1), .int(Int64.max), .int(Int64.min),
        .double(3.25), .double(-0.0), .double(.infinity), .string(""), .string("héllo ✓"),
        .binary([]), .binary([0, 255, 7]), .timestamp(try! Timestamp(seconds: -5, nanoseconds: 999_999_999)),
        .objectId(try! ObjectId(hex: "65a1b2c3d4e5f60718293a4b")),
        .uuid(try! FerryUUID(string: "123e4567-e89b-12d3-a456-426614174000")),
        .list([.int(1), .string("x")]), .list([]),
    ]

    @Test func valuesRoundTrip() throws {
        for v in Self.sampleValues {
            #expect(try ValueCodec.decode(ValueCodec.encode(v)) == v)
        }
    }

    @Test func changesetsRoundTrip() throws {
        let key = FerryValue.objectId(try ObjectId(hex: "65a1b2c3d4e5f60718293a4b"))
        let cs = Changeset(timestamp: 1_700_000_000_123_456_789, instructions: [
            .create(table: "Item", key: key, fields: [FieldValue(name: "ownerId", value: .string("u1")), FieldValue(name: "complexity", value: .int(3))]),
            .set(table: "Item", key: key, field: "itemName", value: .string("x")),
            .addInteger(table: "Item", key: key, field: "complexity", delta: -2),
            .listInsert(table: "Item", key: key, field: "tags", index: 0, value: .string("t")),
            .listSet(table: "Item", key: key, field: "tags", index: 0, value: .string("u")),
            .listErase(table: "Item", key: key, field: "tags", index: 0),
            .listClear(table: "Item", key: key, field: "tags"),
            .erase(table: "Item", key: key),
        ])
        #expect(try ChangesetCodec.decode(ChangesetCodec.encode(cs)) == cs)
    }

    @Test func createRunsFrontCodeSimilarObjects() throws {
        var instructions: [Instruction] = []
        for n in 0..<1000 {
            var id = [UInt8](repeating: 7, count: 12)
            id[10] = UInt8(n >> 8); id[11] = UInt8(n & 255)
            instructions.append(.create(table: "Item", key: .objectId(try ObjectId(bytes: id)), fields: [
                FieldValue(name: "ownerId", value: .string("user-\(n % 100)")),
                FieldValue(name: "itemName", value: .string("item-\(n)")),
                FieldValue(name: "complexity", value: .int(Int64(n % 10))),
            ]))
        }
        // A different field set and other instructions break the run and start another.
        instructions.append(.create(table: "Item", key: .int(1), fields: []))
        instructions.append(.set(table: "Item", key: .int(1), field: "x", value: .int(2)))
        instructions.append(.create(table: "Item", key: .int(2), fields: []))
        let cs = Changeset(timestamp: 1, instructions: instructions)
        let bytes = ChangesetCodec.encode(cs)
        #expect(try ChangesetCodec.decode(bytes) == cs)
        #expect(bytes.count < 1000 * 16, "a run of similar creates takes \(bytes.count) bytes")
    }

    @Test func createRunsCannotExpandWithoutLimit() {
        // A run whose rows each repeat a 60 KB value with a two-byte row: refused, not expanded.
        var w = ByteWriter()
        w.byte(1); w.signed(0); w.varint(2); w.string("T"); w.string("f")
        let rows = 200_000
        w.varint(UInt64(rows))
        w.byte(ChangesetCodec.Tag.createRun.rawValue); w.varint(0); w.varint(1); w.varint(1)
        w.raw([UInt8(rows & 255), UInt8(rows >> 8 & 255), UInt8(rows >> 16 & 255), 0])
        var big = ByteWriter(); ValueCodec.encode(.string(String(repeating: "x", count: 60_000)), into: &big)
        w.varint(0); w.lengthPrefixed(ValueCodec.encode(.int(0)))
        w.varint(0); w.lengthPrefixed(big.bytes)
        for r in 1..<rows { w.varint(0); w.lengthPrefixed(ValueCodec.encode(.int(Int64(r)))); w.varint(UInt64(big.bytes.count)); w.varint(0) }
        #expect(throws: FerryError.self) { try ChangesetCodec.decode(w.bytes) }
    }

    @Test func borrowedValuesEncodeLikeOwnedOnes() {
        func parts(_ v: BorrowedValue) -> [UInt8] { v.withEncodedParts { Array($0) + Array($1) } }
        let text = Array("abc".utf8)
        #expect(text.withUnsafeBufferPointer { parts(.string($0)) } == ValueCodec.encode(.string("abc")))
        for v: FerryValue in [.null, .bool(true), .int(-5), .double(2.5), .timestamp(try! Timestamp(seconds: -3, nanoseconds: 7))] {
            let borrowed: BorrowedValue
            switch v {
            case .null: borrowed = .null
            case .bool(let b): borrowed = .bool(b)
            case .int(let i): borrowed = .int(i)
            case .double(let d): borrowed = .double(d)
            case .timestamp(let t): borrowed = .timestamp(t)
            default: continue
            }
            #expect(parts(borrowed) == ValueCodec.encode(v))
        }
        let u = try! FerryUUID(string: "123e4567-e89b-12d3-a456-426614174000")
        let borrowed = u.array.withUnsafeBytes { BorrowedValue.uuid(bytes: $0) }
        #expect(borrowed.value == .uuid(u))
        #expect(parts(borrowed) == ValueCodec.encode(.uuid(u)))
    }

    @Test func schemaRoundTrips() throws {
        let schema = try Schema([TestSchemas.item])
        #expect(try SchemaCodec.decode(SchemaCodec.encode(schema)) == schema)
    }

    /// Every prefix, every single-byte corruption and random garbage must be an error, never a trap.
    @Test func hostileBytesAreErrors() {
        let cs = ChangesetCodec.encode(Changeset(timestamp: 5, instructions: [
            .create(table: "Item", key: .int(1), fields: [FieldValue(name: "a", value: .list([.string("x"), .int(2)]))]),
            .listInsert(table: "Item", key: .int(1), field: "a", index: 3, value: .double(1)),
        ]))
        for n in 0..<cs.count { _ = try? ChangesetCodec.decode(Array(cs.prefix(n))) }
        for i in cs.indices {
            for flip: UInt8 in [0x01, 0x80, 0xff] {
                var bad = cs
                bad[i] ^= flip
                _ = try? ChangesetCodec.decode(bad)
                _ = try? ValueCodec.decode(bad)
                _ = try? SchemaCodec.decode(bad)
            }
        }
        var rng = SplitMix64(seed: 42)
        for _ in 0..<20_000 {
            let bytes = (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            _ = try? ChangesetCodec.decode(bytes)
            _ = try? ValueCodec.decode(bytes)
            _ = try? SchemaCodec.decode(bytes)
        }
        #expect(throws: FerryError.self) { try ChangesetCodec.decode([1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]) }
        #expect(throws: FerryError.self) { try ValueCodec.decode([10, 0xff, 0xff, 0xff, 0xff, 0x7f]) }
    }
}

