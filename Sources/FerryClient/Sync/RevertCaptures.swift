import FerryCore
import FerryStore

/// A session's captures of objects that downloads changed under the device's recent writes
/// (SPEC F-NOLOSS): the server sends the revert of a compensating write as a download just
/// before the error 231 that names the objects, so the error claims the captures of its
/// objects. Captures no error claims (ordinary merges with other devices' writes) are dropped
/// oldest first beyond `limit`. Loop thread only.
struct RevertCaptures {
    struct Key: Hashable {
        let objectType: String
        let primaryKey: FerryValue
    }

    static let limit = 4096
    private var captures: [Key: (capture: RevertCapture, download: UInt64)] = [:]
    private var order: [Key] = []
    /// Counts the downloads integrated.
    private var downloads: UInt64 = 0

    /// The captures of one download. An object captured in the download just before (a large
    /// answer comes in several messages) keeps the state it had before that one; a capture
    /// from an older download is replaced (the device had that state since).
    mutating func add(_ new: [RevertCapture]) {
        downloads += 1
        for c in new {
            let k = Key(objectType: c.objectType, primaryKey: c.primaryKey)
            if let earlier = captures[k] {
                captures[k] = (earlier.download + 1 == downloads ? earlier.capture.followed(by: c) : c, downloads)
            } else {
                captures[k] = (c, downloads)
                order.append(k)
            }
        }
        if order.count > Self.limit {
            let drop = order.count - Self.limit
            for k in order.prefix(drop) { captures[k] = nil }
            order.removeFirst(drop)
        }
    }

    /// What the revert took from each object the error names (first mention order; an object
    /// named twice gets one record), removing their captures.
    mutating func claim(_ writes: [CompensatingWrite]) -> [RevertedObject] {
        var out: [RevertedObject] = []
        var claimed: Set<Key> = []
        for w in writes {
            let k = Key(objectType: w.objectType, primaryKey: w.primaryKey)
            guard claimed.insert(k).inserted, let c = captures.removeValue(forKey: k) else { continue }
            if let r = c.capture.reverted { out.append(r) }
        }
        if !claimed.isEmpty { order.removeAll { claimed.contains($0) } }
        return out
    }

    mutating func removeAll() {
        captures.removeAll()
        order.removeAll()
    }
}
