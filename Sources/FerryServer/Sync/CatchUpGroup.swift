import FerryAppConfig
import FerryCore
import FerrySyncStorage

/// One catch-up from storage for many sessions at once: what every member is sent to go
/// from its version to `target`, from one read of each class the members subscribe to.
///
/// When another node commits, every session of this node falls behind the head together. Read
/// one session at a time, that cost a query per session per class for every head move: with a
/// thousand observers and a thousand commits a second on the other node, this node fell
/// behind for good (issue 13, two nodes). Together, each class is read once, from the oldest
/// member's version; each member takes what changed after its own version, and only the
/// members whose user may read an object (`ReadPins`) look at it.
///
/// Pure work on values the hub handed over (it holds the members' turns meanwhile); the view
/// checks and encodings of many members run on every core.
struct CatchUpGroup {
    struct Member: Sendable {
        let session: UInt64
        let view: SessionView
        let delivered: UInt64
    }

    let members: [Member]
    let schema: Schema
    let app: AppConfiguration

    /// Each member's DOWNLOAD changesets for what changed in its view after its version, up
    /// to `target` (in the order a member's own catch-up would send them: classes by name,
    /// objects in storage order). Empty for a member with nothing to get.
    func read(from storage: any SyncStorage, through target: UInt64) async throws -> [[[UInt8]]] {
        guard let since = members.map(\.delivered).min() else { return [] }
        let classes = Set(members.flatMap { $0.view.classes }).sorted()
        var changes: [(ObjectSchema, ChangedObject)] = []
        for name in classes {
            guard let os = schema.objectSchema(named: name) else { continue }
            try await storage.changes(since: since, schema: os) { c in
                // Objects changed after `target` are left for the next round (see
                // `SyncHub.readChanges`).
                if c.version <= target { changes.append((os, c)) }
            }
        }
        return encode(changes)
    }

    /// The members' downloads for `changes`.
    func encode(_ changes: [(ObjectSchema, ChangedObject)]) -> [[[UInt8]]] {
        // Which changes each member may be sent: the readers of each object, after its version.
        var pins = ReadPins()
        for (n, m) in members.enumerated() {
            for name in m.view.classes {
                guard let os = schema.objectSchema(named: name) else { continue }
                pins.add(n, role: m.view.roles[name] ?? nil, user: m.view.user, of: os)
            }
        }
        var picks = [[Int]](repeating: [], count: members.count)
        for (i, (os, c)) in changes.enumerated() {
            guard let values = (c.object ?? c.erasedState)?.values else { continue }
            for n in pins.candidates(table: os.name, values: values) where c.version > members[n].delivered {
                // A member named twice (two pins matched) takes the change once.
                if picks[n].last != i { picks[n].append(i) }
            }
        }
        let work = Array(zip(members, picks))
        return FanOutEncoding.map(work) { member, picked in
            var batch = DownloadBatch(session: member.session)
            for i in picked {
                let (os, c) = changes[i]
                if let instruction = member.view.catchUp(c, of: os, app: app) { batch.add(instruction) }
            }
            return batch.isEmpty ? [] : batch.sealed()
        }
    }
}
