import FerryCore
import FerryStore

/// A database's subscription set (SPEC F-SUBS): named queries on object types, a version that
/// grows with every update, and the state the server reported for that version. Kept in the
/// database file, so it survives restarts and is sent again on every connection.
public struct SubscriptionSet: Sendable, Equatable {
    public enum State: UInt8, Sendable {
        /// Written locally, not yet acknowledged by the server.
        case pending = 0
        /// The server accepted it and sent every object it matches.
        case complete = 1
        /// The server rejected it (`errorMessage` says why); the previous set stays in force.
        case error = 2
        /// A newer version replaced it before it completed.
        case superseded = 3
    }
    public var version: UInt64 = 0
    public var state: State = .pending
    public var errorMessage: String = ""
    public var subscriptions: [Subscription] = []

    public init() {}

    static let key = "subscriptions"

    static func load(_ db: Database) throws -> SubscriptionSet {
        guard let bytes = try db.syncValue(key) else { return SubscriptionSet() }
        var r = ByteReader(bytes)
        var s = SubscriptionSet()
        s.version = try r.varint()
        s.state = State(rawValue: try r.byte()) ?? .pending
        s.errorMessage = try r.string()
        s.subscriptions = try readSubscriptions(&r)
        return s
    }

    func save(_ db: Database) throws {
        var w = ByteWriter()
        w.varint(version); w.byte(state.rawValue); w.string(errorMessage)
        Self.write(subscriptions, to: &w)
        try db.setSyncValue(Self.key, w.bytes)
    }

    /// The key of the newest set whose bootstrap this file integrated in full (`reflected`).
    static let reflectedKey = "subscriptions.reflected"

    /// The version and subscriptions of the newest set whose whole bootstrap this file
    /// integrated: what its data reflects (version 0 and no subscriptions: nothing yet). A
    /// set still pending at a reconnect may have had its bootstrap cut short after the server
    /// recorded it, so the session first tells the server this one (issue 22, point 11).
    static func reflected(_ db: Database) throws -> (version: UInt64, subscriptions: [Subscription]) {
        guard let bytes = try db.syncValue(reflectedKey) else { return (0, []) }
        var r = ByteReader(bytes)
        let version = try r.varint()
        return (version, try readSubscriptions(&r))
    }

    /// Records this set as what the file's data reflects (its bootstrap was integrated).
    func saveAsReflected(_ db: Database) throws {
        var w = ByteWriter()
        w.varint(version)
        Self.write(subscriptions, to: &w)
        try db.setSyncValue(Self.reflectedKey, w.bytes)
    }

    /// The subscriptions' encoding in both values: a count, then name, type and query each.
    private static func write(_ subscriptions: [Subscription], to w: inout ByteWriter) {
        w.varint(UInt64(subscriptions.count))
        for s in subscriptions { w.string(s.name); w.string(s.objectType); w.string(s.query) }
    }

    private static func readSubscriptions(_ r: inout ByteReader) throws -> [Subscription] {
        let n = try r.count(minSize: 3)
        var subscriptions: [Subscription] = []
        for _ in 0..<n { subscriptions.append(Subscription(name: try r.string(), objectType: try r.string(), query: try r.string())) }
        return subscriptions
    }

    // MARK: editing (the host's update block)

    /// Adds or replaces the subscription named `name`.
    public mutating func add(name: String, objectType: String, query: String) {
        let s = Subscription(name: name, objectType: objectType, query: query)
        if let i = subscriptions.firstIndex(where: { $0.name == name }) { subscriptions[i] = s } else { subscriptions.append(s) }
    }

    @discardableResult
    public mutating func remove(name: String) -> Bool {
        let before = subscriptions.count
        subscriptions.removeAll { $0.name == name }
        return subscriptions.count != before
    }

    @discardableResult
    public mutating func removeAll(ofType type: String) -> Int {
        let before = subscriptions.count
        subscriptions.removeAll { $0.objectType == type }
        return before - subscriptions.count
    }

    public mutating func removeAll() { subscriptions.removeAll() }
}
