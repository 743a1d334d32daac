import FerryCore
import FerrySyncStorage

/// The objects this node's latest commits wrote, by version: what lets an upload merged ahead
/// of its turn (`PremergedUpload`), whose reads predate those commits, show that its reads are
/// still what the store holds without reading them again under the write lock.
///
/// Only what this node committed is here. Versions it did not commit (another node's, or any
/// it never recorded) leave a gap, and a gap proves nothing: the caller reads again. Bounded:
/// the newest `maxCommits` commits, and at most `maxKeys` object keys over all of them. Each
/// key is kept as its hash only (8 bytes; keeping the commits' entries held 130 MB more in a
/// 1,000,000-object upload): two keys with one hash make a commit look as if it wrote both,
/// which only costs the caller a read.
struct RecentCommits: Sendable {
    private struct Record: Sendable {
        let before: UInt64
        let after: UInt64
        let written: Set<Int>
    }

    let maxCommits: Int
    let maxKeys: Int
    private var records: [Record] = []
    private var keyCount = 0

    init(maxCommits: Int = 16, maxKeys: Int = 262_144) {
        self.maxCommits = max(1, maxCommits)
        self.maxKeys = max(1, maxKeys)
    }

    /// Records a durable commit that moved the head from `before` to `after` and wrote (at
    /// most) the objects `written` names. A commit larger than `maxKeys` is not kept.
    mutating func record<Keys: Collection<ObjectKey>>(before: UInt64, after: UInt64, written keys: Keys) {
        guard after > before else { return }
        // A version recorded twice (it cannot be, unless the head went back): start over.
        if let last = records.last, last.after > before { forgetAll() }
        guard keys.count <= maxKeys else { return forgetAll() }
        var written = Set<Int>(minimumCapacity: keys.count)
        for k in keys { written.insert(k.hashValue) }
        records.append(Record(before: before, after: after, written: written))
        keyCount += written.count
        while records.count > maxCommits || keyCount > maxKeys {
            keyCount -= records.removeFirst().written.count
        }
    }

    /// Whether every version after `readHead` through `head` was recorded here and none of
    /// them wrote any of `keys`: then what was read at `readHead` is what `head` holds.
    func untouched(_ keys: [ObjectKey], after readHead: UInt64, through head: UInt64) -> Bool {
        if head == readHead { return true }
        guard head > readHead, let first = records.firstIndex(where: { $0.before == readHead }) else { return false }
        var at = readHead
        for r in records[first...] {
            guard r.before == at else { return false }
            for k in keys where r.written.contains(k.hashValue) { return false }
            at = r.after
            if at == head { return true }
            if at > head { return false }
        }
        return false
    }

    mutating func forgetAll() {
        records.removeAll()
        keyCount = 0
    }
}
