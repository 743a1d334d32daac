/// The order of concurrent writes: a changeset's timestamp, then the client file that made it.
/// Last-writer-wins compares stamps, so every replica picks the same winner.
public struct Stamp: Comparable, Hashable, Sendable {
    public var timestamp: Int64
    public var fileIdent: UInt64
    public init(timestamp: Int64, fileIdent: UInt64) {
        self.timestamp = timestamp
        self.fileIdent = fileIdent
    }
    public static let zero = Stamp(timestamp: Int64.min, fileIdent: 0)
    public static func < (a: Stamp, b: Stamp) -> Bool {
        a.timestamp != b.timestamp ? a.timestamp < b.timestamp : a.fileIdent < b.fileIdent
    }
}

extension Stamp {
    /// Whether a write at this stamp, from a client that had integrated server version `base`,
    /// comes after the write that left a property at stamp `current` in server version
    /// `version`. It does when that write was the same client file's (the server merges a
    /// file's changesets in the order the file made them, and a changeset's instructions in
    /// their order, all at one stamp), or when the writer had integrated it (`version` at or
    /// before its base): a write made after another one replaces it, whatever the clocks say.
    /// Only between concurrent writes does the later stamp win.
    public func supersedes(_ current: Stamp, writtenAt version: UInt64, base: UInt64) -> Bool {
        fileIdent == current.fileIdent || version <= base || self > current
    }
}
