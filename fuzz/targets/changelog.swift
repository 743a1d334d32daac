// Fuzz target: the change log another process wrote into a synced file (SPEC F-MULTIPROC,
// ChangeLogCodec): a damaged or hostile entry must give an error, never a crash. Checks the
// round trip of what decodes.
// fuzz-sources: Sources/FerryStore/Notifications/CommittedChanges.swift Sources/FerryStore/Notifications/ChangeLogCodec.swift
public func fuzzChangeLog(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let changes = try? ChangeLogCodec.decode(bytes) else { return 0 }
    let again = try? ChangeLogCodec.decode(ChangeLogCodec.encode(changes))
    precondition(again.map { same($0, changes) } == true, "a change-log entry did not round-trip")
    return 0
}

private func same(_ a: CommittedChanges, _ b: CommittedChanges) -> Bool {
    guard a.byClass.count == b.byClass.count else { return false }
    for (table, objects) in a.byClass {
        guard let other = b.byClass[table], other.count == objects.count else { return false }
        for (key, t) in objects {
            guard let u = other[key], u.created == t.created, u.erased == t.erased, u.properties == t.properties else { return false }
        }
    }
    return true
}
