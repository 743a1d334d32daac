import Testing
@testable import FerryCore

/// The write rules a server publishes to a session (SPEC F-PRECHECK): `%%user` expanded on the
/// server, encoded compactly, decoded defensively, and judged on the device exactly as the
/// server judges with the unexpanded role.
@Suite("Write rules")
struct WriteRulesTests {
    static let owner = Role(name: "owner-read-write", readFilter: .field("ownerId", .equal(.user(path: "id"))),
                            writeFilter: .field("ownerId", .equal(.user(path: "id"))), read: true, write: true)
    static let ana = UserContext(id: "6566a1b2c3", customData: ["team": .string("blue")])

    /// The seeds' role for Ana, plus a filter with every kind of node and an expansion she lacks.
    static let published = WriteRules(classes: [
        ClassWriteRules(objectType: "Item", role: owner.expanded(for: ana), queryableFields: ["_id", "complexity", "ownerId"]),
        ClassWriteRules(objectType: "Note", role: Role(name: "team", writeFilter: .and([
            .or([.field("team", .equal(.user(path: "custom_data.team"))), .field("public", .equal(.value(.bool(true))))]),
            .nor([.field("locked", .exists(true))]),
            .field("level", .all([.greaterOrEqual(.value(.int(1))), .less(.value(.double(9.5)))])),
            .field("tag", .in([.value(.string("a")), .user(path: "data.missing")])),
            .field("kind", .notIn([.value(.null)])),
            .field("x", .notEqual(.value(.int(3)))), .field("y", .greater(.value(.int(0)))), .field("z", .lessOrEqual(.value(.int(0)))),
            .all,
        ]).expanded(for: ana), write: true, insert: false, delete: true), queryableFields: ["_id"]),
        ClassWriteRules(objectType: "Secret", role: nil, queryableFields: []),
    ])

    /// `published` as it travels: only what a write check reads (the read filter and the read
    /// flag stay on the server).
    static var onTheWire: WriteRules {
        var rules = published
        for i in rules.classes.indices {
            rules.classes[i].role?.readFilter = nil
            rules.classes[i].role?.read = false
        }
        return rules
    }

    @Test func expansionReplacesUserValuesAndDecidesApplyWhen() throws {
        let r = try #require(Self.published.rules(for: "Item")?.role)
        #expect(r.writeFilter == .field("ownerId", .equal(.value(.string("6566a1b2c3")))))
        #expect(r.applyWhen == .all)
        // An expansion the user does not have matches nothing, as before expansion.
        guard case .and(let parts)? = Self.published.rules(for: "Note")?.role?.writeFilter, case .field(_, .in(let ops)) = parts[3] else {
            Issue.record("unexpected filter shape")
            return
        }
        #expect(ops == [.value(.string("a")), .unresolved])
        #expect(UserContext(id: "").resolve("unresolved") == nil)
    }

    @Test func rulesRoundTripThroughTheCodec() throws {
        let decoded = try WriteRulesCodec.decode(WriteRulesCodec.encode(Self.published))
        #expect(decoded == Self.onTheWire)
        #expect(decoded.rules(for: "Item")?.role?.readFilter == nil)
        #expect(decoded.rules(for: "Note")?.role?.insert == false)
        #expect(decoded.rules(for: "Secret")?.role == nil)
    }

    @Test func hostileRulesAreErrorsNeverTraps() {
        let bytes = WriteRulesCodec.encode(Self.published)
        for n in 0..<bytes.count { _ = try? WriteRulesCodec.decode(Array(bytes.prefix(n))) }
        for i in bytes.indices {
            for flip: UInt8 in [0x01, 0x80, 0xff] {
                var bad = bytes
                bad[i] ^= flip
                _ = try? WriteRulesCodec.decode(bad)
            }
        }
        // A filter nested past the bound: `and` of `and` of ... is refused, not recursed into.
        // (1 class "I", a role "r" allowing everything, a filter, then 0 queryable fields.)
        let head: [UInt8] = [1, 1, 0x49, 1, 1, 0x72, 7, 1]
        let deep = head + Array(repeating: [UInt8]([1, 1]), count: 40).flatMap { $0 } + [0, 0]
        let shallow = head + Array(repeating: [UInt8]([1, 1]), count: 20).flatMap { $0 } + [0, 0]
        #expect((try? WriteRulesCodec.decode(shallow)) != nil)
        #expect(throws: FerryError.self) { try WriteRulesCodec.decode(deep) }
        #expect(throws: FerryError.self) { try WriteRulesCodec.decode([1, 1, 0x49, 2, 0]) }
    }

    /// The device's check with the published (expanded) role gives the server's verdicts and
    /// the seeds' exact strings.
    @Test func theDevicesCheckAgreesWithTheServers() throws {
        let os = try ObjectSchema(name: "Item", properties: [
            Property(name: "_id", type: .int, isPrimaryKey: true), Property(name: "ownerId", type: .string),
            Property(name: "complexity", type: .int),
        ])
        let subs = [try CompiledQuery("complexity <= 4", on: os)]
        let server = WriteValidator(objectSchema: os, rules: CollectionRules(roles: [Self.owner]), subscriptions: subs)
        let decoded = try WriteRulesCodec.decode(WriteRulesCodec.encode(Self.published))
        let device = WriteValidator(objectSchema: os, rules: try #require(decoded.rules(for: "Item")).collectionRules, subscriptions: subs)
        let cases: [([FerryValue]?, [FerryValue]?)] = [
            (nil, [.int(1), .string(Self.ana.id), .int(3)]),
            (nil, [.int(2), .string(Self.ana.id), .int(7)]),
            (nil, [.int(3), .string("This string does not match the user.id"), .int(1)]),
            ([.int(4), .string(Self.ana.id), .int(1)], [.int(4), .string("someone else"), .int(1)]),
            ([.int(5), .string(Self.ana.id), .int(1)], nil),
        ]
        for (before, after) in cases {
            #expect(device.check(user: UserContext(id: ""), before: before, after: after) == server.check(user: Self.ana, before: before, after: after))
        }
        #expect(device.check(user: UserContext(id: ""), before: nil, after: [.int(2), .string(Self.ana.id), .int(7)])?.reason
                == "write to \"2\" in table \"Item\" not allowed; object is outside of the current query view")
        #expect(device.check(user: UserContext(id: ""), before: nil, after: [.int(3), .string("x"), .int(1)])?.reason
                == "write to \"3\" in table \"Item\" was denied by write filter in role \"owner-read-write\"")
    }
}
