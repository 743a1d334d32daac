#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FerryCore)
import FerryCore // the fuzz build compiles this file into one module with FerryCore's sources
#endif

extension ObjectKey {
    /// Objects with their keys encoded (`ValueCodec`, as the stores keep them), in the stores'
    /// key order: class name, then encoded key, both compared as bytes (SQLite's and
    /// PostgreSQL's `bytea` order). A commit writes in this order so that time-ordered ids
    /// append to the primary key's B-tree and fill its pages; a dictionary's order would
    /// insert them at random places among each other.
    /// Inlinable so that each store's call is specialized for its value type: the generic
    /// version sorted through metadata and witness tables at 50,000 instructions per object.
    @inlinable
    public static func inStorageOrder<T, Objects: Sequence<(key: ObjectKey, value: T)>>(_ objects: Objects) -> [(table: String, pk: [UInt8], value: T)] {
        objects.map { (table: $0.key.table, pk: ValueCodec.encode($0.key.key), value: $0.value) }
            .sorted { a, b in a.table != b.table ? a.table.utf8.lexicographicallyPrecedes(b.table.utf8) : bytesPrecede(a.pk, b.pk) }
    }

    /// Whether `a` sorts before `b` as the stores compare blobs (memcmp, then the shorter first).
    @usableFromInline
    static func bytesPrecede(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let n = min(a.count, b.count)
        let c = n == 0 ? 0 : a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in memcmp(pa.baseAddress!, pb.baseAddress!, n) } }
        return c != 0 ? c < 0 : a.count < b.count
    }
}
