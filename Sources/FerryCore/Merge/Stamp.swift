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
