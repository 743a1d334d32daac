import Dispatch
import Foundation
import FerryCore
import FerrySyncStorage

/// One commit's fan-out to the sessions the hub found ready for it (idle, exactly at the
/// version before it): which changed objects each session's view holds (one that left the
/// view: its erase), and the DOWNLOAD changesets, encoded once for every session that gets
/// the same instructions.
///
/// Pure work on values the hub handed over, so with many receivers it runs on every core
/// (`DispatchQueue.concurrentPerform`) while the hub waits for it: nothing else of the hub
/// interleaves (no actor reentrancy), and each session's downloads still go out in version
/// order. Few receivers (the usual commit, thanks to `FanOutIndex`) are done in line.
struct FanOutEncoding {
    /// What the fan-out needs of one ready session.
    struct Receiver {
        let session: UInt64
        let view: SessionView
        let acknowledged: UInt64
        let subscriptionVersion: UInt64
        let outbox: ConnectionOutbox
    }

    /// The commit's changed objects, with their states before and after.
    let changed: [(ObjectKey, UploadIntegration.Entry)]
    let schema: Schema
    /// From this many receivers on, the view checks and the encodings run in parallel.
    static let parallelFrom = 64

    /// Sends `receivers` what concerns them of the commit at `version`. A session whose view
    /// holds none of the changed objects, before or after, is sent nothing.
    func send(_ version: UInt64, to receivers: [Receiver]) {
        guard !receivers.isEmpty else { return }
        let chosen = Self.map(receivers) { picks(for: $0.view) }
        let distinct = Array(Set(chosen.filter { !$0.isEmpty }))
        let encodings = Self.map(distinct) { encode($0) }
        var byPicks: [[Int]: [[UInt8]]] = [:]
        for (p, e) in zip(distinct, encodings) { byPicks[p] = e }
        for (r, p) in zip(receivers, chosen) {
            guard let chunks = byPicks[p] else { continue }
            var batch = DownloadBatch(session: r.session, sealed: chunks)
            batch.finish(serverVersion: version, acknowledged: r.acknowledged, subscriptionVersion: r.subscriptionVersion, to: r.outbox)
        }
    }

    /// What a session with `view` gets, as positions in `changed` (even: the object's state,
    /// odd: its erase).
    func picks(for view: SessionView) -> [Int] {
        var picks: [Int] = []
        for (n, (k, e)) in changed.enumerated() {
            guard let os = schema.objectSchema(named: k.table) else { continue }
            if let current = e.stored.object, view.contains(current.values, of: os) { picks.append(2 * n) }
            else if let b = e.before, view.contains(b.values, of: os) { picks.append(2 * n + 1) }
        }
        return picks
    }

    /// The DOWNLOAD changesets of `picks`.
    func encode(_ picks: [Int]) -> [[UInt8]] {
        var batch = DownloadBatch(session: 0)
        for p in picks {
            let (k, e) = changed[p / 2]
            if p % 2 == 0, let current = e.stored.object, let os = schema.objectSchema(named: k.table) { batch.add(current.fullState(os)) }
            else { batch.add(.erase(table: k.table, key: k.key)) }
        }
        return batch.sealed()
    }

    /// `transform` of every element, in order; in parallel from `parallelFrom` elements on.
    static func map<T, R>(_ items: [T], _ transform: (T) -> R) -> [R] {
        guard items.count >= parallelFrom else { return items.map(transform) }
        let slices = min(items.count, 8 * max(1, ProcessInfo.processInfo.activeProcessorCount))
        nonisolated(unsafe) let items = items
        return withoutActuallyEscaping(transform) { transform in
            [R](unsafeUninitializedCapacity: items.count) { buffer, initialized in
                nonisolated(unsafe) let results = buffer
                nonisolated(unsafe) let transform = transform
                DispatchQueue.concurrentPerform(iterations: slices) { slice in
                    // Each slice initializes only its own elements.
                    for i in stride(from: slice, to: items.count, by: slices) {
                        results.initializeElement(at: i, to: transform(items[i]))
                    }
                }
                initialized = items.count
            }
        }
    }
}
