#if canImport(FerryCore)
import FerryCore // the fuzz build compiles this file into one module with FerryCore's sources
#endif

/// What one commit touched, by class: the objects and, per object, the properties. Built once
/// per commit from the transaction's instructions and shared by every observer.
public struct CommittedChanges: Sendable {
    public struct Touched: Sendable {
        /// Properties set on the object (all of them for a create).
        public var properties: Set<String> = []
        public var created = false
        public var erased = false
    }
    public private(set) var byClass: [String: [FerryValue: Touched]] = [:]

    public init(_ instructions: [Instruction]) {
        for i in instructions { record(i) }
    }

    /// Adds one applied instruction (a client reset builds its summary this way, one object at
    /// a time, instead of keeping every instruction it applied).
    mutating func record(_ i: Instruction) {
        var t = byClass[i.table, default: [:]][i.key, default: Touched()]
        switch i {
        case .create(_, _, let fields):
            t.created = true
            for f in fields { t.properties.insert(f.name) }
        case .erase: t.erased = true
        default: if let f = i.field { t.properties.insert(f) }
        }
        byClass[i.table, default: [:]][i.key] = t
    }

    /// Adds an object written whole, as a create of `properties` would (a client reset's
    /// overwrite of an object with the server's state).
    mutating func recordWhole(table: String, key: FerryValue, properties: [String]) {
        var t = byClass[table, default: [:]][key, default: Touched()]
        t.created = true
        t.properties.formUnion(properties)
        byClass[table, default: [:]][key] = t
    }

    /// Adds an object as another process's change log recorded it (`ChangeLogCodec`).
    mutating func recordLogged(table: String, key: FerryValue, created: Bool, erased: Bool, properties: [String]) {
        var t = byClass[table, default: [:]][key, default: Touched()]
        t.created = t.created || created
        t.erased = t.erased || erased
        t.properties.formUnion(properties)
        byClass[table, default: [:]][key] = t
    }

    public var isEmpty: Bool { byClass.isEmpty }

    mutating func merge(_ other: CommittedChanges) {
        for (table, objects) in other.byClass {
            for (key, t) in objects {
                var mine = byClass[table, default: [:]][key, default: Touched()]
                mine.properties.formUnion(t.properties)
                mine.created = mine.created || t.created
                mine.erased = mine.erased || t.erased
                byClass[table, default: [:]][key] = mine
            }
        }
    }
}
