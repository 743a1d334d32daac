import FerryCore
import FerrySyncStorage

/// `ChangedObject` as a value the tests compare whole.
struct Change: Equatable, CustomStringConvertible {
    var key: FerryValue
    var object: StampedObject?
    var erasedState: StampedObject?
    var version: UInt64

    init(key: FerryValue, object: StampedObject?, erasedState: StampedObject? = nil, version: UInt64) {
        self.key = key
        self.object = object
        self.erasedState = erasedState
        self.version = version
    }

    init(_ c: ChangedObject) { self.init(key: c.key, object: c.object, erasedState: c.erasedState, version: c.version) }

    var description: String { "\(key)@\(version)\(object == nil ? " (tombstone\(erasedState == nil ? "" : " with erased state"))" : "")" }
}

extension SyncStorage {
    /// Every change of `schema`'s class after `version`, in the order the store reports them.
    func allChanges(since version: UInt64, _ schema: ObjectSchema) async throws -> [Change] {
        var out: [Change] = []
        try await changes(since: version, schema: schema) { out.append(Change($0)) }
        return out
    }

    /// Commits `objects` in a transaction of their own, acknowledging `clientVersion` of
    /// `clientFile`; returns the version `write` reported.
    @discardableResult
    func commit(_ objects: [ObjectKey: StoredObject], clientFile: UInt64, clientVersion: UInt64 = 0) async throws -> UInt64 {
        try await writeTransaction { tx in
            try await tx.write(objects: objects, clientFile: clientFile, clientVersion: clientVersion)
        }
    }

    func head() async throws -> UInt64 { try await syncState().headVersion }
}

extension SyncSnapshot {
    func allChanges(since version: UInt64, _ schema: ObjectSchema) async throws -> [Change] {
        var out: [Change] = []
        try await changes(since: version, schema: schema) { out.append(Change($0)) }
        return out
    }

    func allObjects(_ schema: ObjectSchema) async throws -> [FerryValue: StampedObject] {
        var out: [FerryValue: StampedObject] = [:]
        try await forEachObject(schema: schema) { out[$0] = $1 }
        return out
    }
}

/// The error a test's transaction body throws on purpose.
struct Deliberate: Error, Equatable {}
