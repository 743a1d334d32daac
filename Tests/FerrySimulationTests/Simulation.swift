import FerryAppConfig
import FerryCore
@testable import FerryServer
import FerryStore
import FerrySyncStorage
import Foundation

/// A deterministic simulation of sync (issue 25, point 5): one process, one seed, no sockets
/// and no real time. Devices are real client stores (FerryStore's `Database` on in-memory
/// SQLite: their write path, upload queue and download integration, which lays unacknowledged
/// local changes over the server's state) driven by the sync session's own protocol decisions
/// (`SessionMachine`, the state machine `SyncSession` runs: BIND, IDENT, UPLOAD, DOWNLOAD with
/// its acknowledgement, ERROR 231, MARK, and a client reset's BIND, QUERY and fresh state),
/// speaking real `ProtocolMessage`s; the server is the real merge and validation
/// (`UploadIntegration`), refusal ledger (`RefusalLedger`) and bind policy (`BindRules`) over
/// the server's stored states; between them a simulated network of per-connection FIFO queues
/// that the seed drives (delivery order across devices, disconnects, device and server crashes
/// and restarts, and every other "server crash" the admin terminating and enabling sync, which
/// forgets every client file so every device must reset), and a simulated clock that stamps
/// every changeset. Host work is random
/// transactions of one to three operations: a device's own documents (create, set, add,
/// delete), documents every device shares (a title that the last writer sets, a counter every
/// device adds to), and other users' documents, which the server refuses; every third
/// transaction the host also waits for download, and the one after it for upload.
///
/// After every step, no receipt of a transaction the server refuses reads acknowledged. At every
/// quiet point (every device connected and nothing left to send) it checks: every
/// device holds exactly the server's documents; the server's documents are what a sequential
/// oracle of the hosts' commits says (sim time orders every commit, and the merge's "later
/// stamp wins" and "adds commute" agree with that order for these operations), less the
/// transactions a client reset (discard mode) threw away before the server had them; nothing is left
/// unacknowledged; every refused write was reported to its device, its revert captured, and
/// handed to the host with its error 231; every write receipt has settled through the answers
/// and the MARKs the session sent (as its timer sends them when acknowledgements pause):
/// rejected (with exactly its refused objects) or acknowledged, and a discarded one rejected;
/// every wait for download
/// completed, and so did every wait for upload; each direction's progress (the session's own
/// `ProgressNotifiers`) never went back in transferred bytes and ends at 1.0. A device crash
/// loses no committed write (the oracle includes them all).
///
/// Refused writes are reverted and reported with an ERROR 231 that is a message of its own, so
/// a connection can be lost between an answer's DOWNLOAD and its 231, as on the wire; the
/// server keeps its refusals and sends them again at the next BIND.
///
/// Not yet simulated: the shell that runs the machine's effects on the libuv loop
/// (`SyncSession`: a simpler runner of the same effects is here), the hub's sessions and
/// fan-out chain (the server here answers as they do) and its SQLite storage, subscriptions
/// and views (the view is every document), client resets in the recovering modes. Hosts also
/// suspend sessions (every other lost connection) and resume them; a suspended session must
/// bind nothing.
///
/// Two gaps of a terminate are counted, not failed (printed with the run): a transaction whose
/// acknowledgement the terminate took although the server had integrated it is discarded by
/// the reset and its receipt reads rejected (the data is right: the fresh state has it); and a
/// refusal whose ERROR 231 the terminate took is never reported (the server forgot the file's
/// refusals with it), and its receipt is not judged.
final class Simulation {
    struct Failure: Error, CustomStringConvertible {
        let step: Int
        let message: String
        var description: String { "at step \(step): \(message)" }
    }

    let seed: UInt64
    let stepLimit: Int
    var rng: SimRandom
    let clock = SimClock()
    var server: SimServer
    var devices: [SimDevice] = []
    /// The documents the server started with, and every host transaction's writes the rules
    /// allow (device, its client-file generation, local version), in commit order: the oracle
    /// folds them (`expectedDocs`).
    var oracle: [String: SimDoc] = [:]
    var log: [(device: Int, generation: Int, version: UInt64, ops: [(String, SimOp)])] = []
    /// Per device and generation, the local version through which the server had integrated
    /// the file's uploads when a terminate forgot it: the later writes of that generation are
    /// discarded by the device's client reset (discard mode) and never reach the server.
    var cutoffs: [Int: [Int: UInt64]] = [:]
    var trace: [String] = []
    var step = 0
    static let deviceCount = 3
    static let sharedKeys = ["s0", "s1"]

    init(seed: UInt64, steps: Int, app: AppConfiguration, replaysRefusals: Bool = true) throws {
        self.seed = seed
        stepLimit = steps
        rng = SimRandom(seed: seed)
        server = try SimServer(app: app, clock: clock)
        server.replaysRefusals = replaysRefusals
        for key in Self.sharedKeys {
            let doc = SimDoc(owner: "alice", title: "shared", counter: 0, rank: 0)
            try server.seed(key: key, doc: doc)
            oracle[key] = doc
        }
        for n in 0..<Self.deviceCount {
            devices.append(try SimDevice(index: n, name: "sim-\(seed)-\(n)-\(UInt64.random(in: 0...UInt64.max))", schema: server.schema, clock: clock))
        }
    }

    deinit { for d in devices { d.destroy() } }

    func note(_ s: String) { trace.append("\(step): \(s)") }

    /// Runs the seed's steps, then a final quiet point. Throws the first broken invariant.
    func run() throws {
        while step < stepLimit {
            step += 1
            clock.advance(by: 1_000_000)
            try randomStep()
            try noRejectedReceiptReadsAcknowledged()
        }
        try quietPoint()
    }

    private func randomStep() throws {
        let d = devices[rng.next(devices.count)]
        switch rng.next(100) {
        case 0..<35: try hostTransaction(on: d)
        case 35..<55:
            guard d.connected, !d.toServer.isEmpty else { return }
            let m = d.toServer.removeFirst()
            note("server receives \(SimMessage.describe(m)) from device \(d.index)")
            try server.receive(m, from: d.index, devices: devices, failure: fail)
        case 55..<75:
            guard d.connected, !d.toDevice.isEmpty else { return }
            let m = d.toDevice.removeFirst()
            note("device \(d.index) receives \(SimMessage.describe(m))")
            try d.receive(m, failure: fail)
        case 75..<85:
            guard d.connected else { return }
            if try d.uploadPending() {
                note("device \(d.index) uploads through local version \(d.lastUploaded)")
            } else if try d.sendReceiptMark(failure: fail) {
                note("device \(d.index) sends a MARK to settle its receipts")
            }
        case 85..<92:
            guard !d.connected else { return }
            if d.paused {
                // The host resumes (no draw from the seed's stream, as below).
                d.resume()
                note("device \(d.index)'s host resumes its session")
            }
            note("device \(d.index) connects")
            try d.connect(failure: fail)
            server.connected(d.index)
        case 92..<96:
            guard d.connected else { return }
            // Every other time it is the host that suspends the session (no draw from the
            // seed's stream, so the pinned seeds keep their runs): a suspended session does
            // not connect until the host resumes it.
            if step % 2 == 0, d.suspend() {
                note("device \(d.index)'s host suspends its session")
            } else {
                note("device \(d.index) loses its connection")
                d.disconnect()
            }
            server.disconnected(d.index)
        case 96..<98:
            note("device \(d.index) crashes and restarts")
            // What the session held in memory (the captures of reverts) goes with it.
            d.deniedWrites = []
            d.captured = []
            d.answered = []
            d.reverted = []
            d.disconnect()
            server.disconnected(d.index)
            try d.restart()
        case 98..<99:
            // Every other time the admin terminates and enables sync instead (no draw from
            // the seed's stream): every device must reset (discard mode).
            if step % 2 == 0 {
                note("the admin terminates and enables sync (every client file forgotten, the data kept)")
                for x in devices {
                    let f = try x.clientFile()
                    if f != 0, let integrated = server.files[f]?.acknowledged, cutoffs[x.index]?[x.generation] == nil {
                        cutoffs[x.index, default: [:]][x.generation] = integrated
                    }
                    // Refusals the device has no answer for are forgotten with the file.
                    if f != 0, let ledger = server.refusals[f] {
                        x.refusalsLost(Set(ledger.records.flatMap(\.writes).compactMap { w -> String? in if case .string(let k) = w.primaryKey { k } else { nil } }))
                    }
                    if x.connected { x.disconnect() }
                }
                server.terminateAndEnable()
            } else {
                note("the server crashes and restarts (what it committed stays)")
                for x in devices where x.connected { x.disconnect() }
                server.restart()
            }
        default:
            note("a quiet point")
            try quietPoint()
        }
    }

    /// One to three operations in one transaction, recorded in the oracle at commit.
    private func hostTransaction(on d: SimDevice) throws {
        var ops: [(String, SimOp)] = []
        var local: [String: SimDoc?] = [:]
        func current(_ key: String) throws -> SimDoc? {
            if let known = local[key] { return known }
            let doc = try d.doc(key)
            local[key] = doc
            return doc
        }
        var denied: Set<String> = []
        for _ in 0..<(1 + rng.next(3)) {
            if rng.next(10) == 0 {
                // A document of another user: the server's write filter refuses it, the device
                // must get the refusal and the revert (SPEC F-NOLOSS), the oracle leaves it out.
                let key = "x\(d.index)-\(rng.next(2))"
                guard try current(key) == nil else { continue }
                let op = SimOp.create(SimDoc(owner: "bob", title: "not mine \(step)", counter: 0, rank: 0))
                ops.append((key, op))
                denied.insert(key)
                var doc: SimDoc? = nil
                op.apply(to: &doc)
                local[key] = doc
            } else if rng.next(3) == 0 {
                let key = Self.sharedKeys[rng.next(Self.sharedKeys.count)]
                guard try current(key) != nil else { continue } // not downloaded yet
                let op: SimOp = rng.next(2) == 0 ? .title("t\(step)-\(d.index)") : .add(Int64(rng.next(7)) - 3)
                ops.append((key, op))
                var doc = try current(key)
                op.apply(to: &doc)
                local[key] = doc
            } else {
                let key = "d\(d.index)-\(rng.next(3))"
                let doc = try current(key)
                let op: SimOp
                if doc == nil {
                    op = .create(SimDoc(owner: "alice", title: "n\(step)", counter: Int64(rng.next(10)), rank: Int64(rng.next(4))))
                } else {
                    switch rng.next(8) {
                    case 0: op = .delete
                    case 1, 2: op = .rank(Int64(rng.next(4)))
                    case 3, 4: op = .add(Int64(rng.next(7)) - 3)
                    default: op = .title("o\(step)")
                    }
                }
                ops.append((key, op))
                var after = doc
                op.apply(to: &after)
                local[key] = after
            }
        }
        guard !ops.isEmpty else { return }
        try d.commit(ops)
        d.deniedWrites.formUnion(denied)
        log.append((d.index, d.generation, d.receipts.last?.version ?? 0, ops.filter { !denied.contains($0.0) }))
        note("device \(d.index) commits " + ops.map { "\($0.0) \($0.1)" }.joined(separator: ", "))
        // Every third transaction the host also waits for download (a MARK), the one after
        // for upload (no draw from the seed's stream, so the pinned seeds keep their runs).
        if d.receipts.count % 3 == 0 {
            try d.waitForDownload(failure: fail)
            note("device \(d.index)'s host waits for download")
        } else if d.receipts.count % 3 == 1 {
            try d.waitForUpload(failure: fail)
            note("device \(d.index)'s host waits for upload")
        }
    }

    private func fail(_ message: String) -> Failure { Failure(step: step, message: message) }

    /// Connects every device and runs the network until nothing is left to send; then checks
    /// the invariants.
    func quietPoint() throws {
        for d in devices where !d.connected {
            // A suspended session stays off its connection while paused...
            if d.paused {
                try d.connect(failure: fail)
                if !d.toServer.isEmpty { throw fail("device \(d.index)'s suspended session sent \(d.toServer.map(SimMessage.describe))") }
                d.disconnect()
                // ...and syncs everything once the host resumes it.
                d.resume()
            }
            try d.connect(failure: fail)
            server.connected(d.index)
        }
        var rounds = 0
        while true {
            rounds += 1
            guard rounds < 10_000 else { throw fail("the network did not go quiet") }
            var moved = false
            for d in devices {
                if try d.uploadPending() { moved = true }
                // Acknowledgements paused: the session's timer sends a MARK to settle receipts.
                if try d.sendReceiptMark(failure: fail) { moved = true }
                while !d.toServer.isEmpty {
                    try server.receive(d.toServer.removeFirst(), from: d.index, devices: devices, failure: fail)
                    moved = true
                }
            }
            for d in devices {
                while !d.toDevice.isEmpty {
                    try d.receive(d.toDevice.removeFirst(), failure: fail)
                    moved = true
                }
            }
            if !moved { break }
        }
        let serverDocs = server.docs()
        let expected = expectedDocs()
        if serverDocs != expected {
            throw fail("the server's documents differ from the hosts' commits:\n" + Self.difference(expected, serverDocs, "oracle", "server"))
        }
        for d in devices {
            let docs = try d.allDocs()
            if docs != serverDocs {
                throw fail("device \(d.index) differs from the server:\n" + Self.difference(serverDocs, docs, "server", "device \(d.index)"))
            }
            if try d.unacknowledged() > 0 { throw fail("device \(d.index) has local changes the server never acknowledged") }
            // No wait hangs: every wait for download the host made since the device started was
            // answered (its MARK sent again on each new connection), and none failed.
            let waits = d.downloadWaitsDone.withLock { $0 }
            if waits.ok != d.downloadWaits || waits.failed != 0 {
                throw fail("device \(d.index)'s host made \(d.downloadWaits) waits for download: \(waits.ok) completed, \(waits.failed) failed")
            }
            let uploadWaits = d.uploadWaitsDone.withLock { $0 }
            if uploadWaits.ok != d.uploadWaits || uploadWaits.failed != 0 {
                throw fail("device \(d.index)'s host made \(d.uploadWaits) waits for upload: \(uploadWaits.ok) completed, \(uploadWaits.failed) failed")
            }
            // Progress: each direction's transferred bytes never went back, and both report
            // everything done (1.0, transferred as much as was transferable).
            for (direction, reports) in [("upload", d.uploadReports.withLock { $0 }), ("download", d.downloadReports.withLock { $0 })] {
                if let back = zip(reports, reports.dropFirst()).first(where: { $1.transferredBytes < $0.transferredBytes }) {
                    throw fail("device \(d.index)'s \(direction) progress went back from \(back.0) to \(back.1)")
                }
                guard let last = reports.last, last.progressEstimate == 1.0, last.transferredBytes == last.transferableBytes else {
                    throw fail("device \(d.index)'s \(direction) progress does not end done: \(reports.suffix(3))")
                }
            }
            // Every refused write this device made (since its last crash) was reported by the
            // server, reached the device with its error 231 (sent again when a connection lost
            // it: `RefusalLedger`), and the device's store captured its revert.
            let unreported = d.deniedWrites.subtracting(server.reported)
            if !unreported.isEmpty { throw fail("device \(d.index)'s refused writes to \(unreported.sorted()) were never reported") }
            let unanswered = d.deniedWrites.subtracting(d.answered)
            if !unanswered.isEmpty { throw fail("device \(d.index)'s writes to \(unanswered.sorted()) were reverted without their error 231") }
            let uncaptured = d.deniedWrites.subtracting(d.captured)
            if !uncaptured.isEmpty { throw fail("device \(d.index) got the refusal of its writes to \(uncaptured.sorted()) but did not capture their revert") }
            // ...and the session handed the host what each revert took, with its error 231.
            let unreverted = d.deniedWrites.subtracting(d.reverted)
            if !unreverted.isEmpty { throw fail("device \(d.index)'s session reported the refusal of its writes to \(unreverted.sorted()) without what the revert took") }
            d.deniedWrites = []
            d.answered = []
            d.captured = []
            d.reverted = []
            // Every receipt settled, by the answers and the MARKs the session sent (none is
            // settled here by hand). A transaction with a refused write reads rejected, with
            // exactly those objects' compensating writes; every other reads acknowledged.
            for t in d.receipts where !t.refusalLost {
                let (receipt, denied) = (t.receipt, t.denied)
                let status = try d.db.receiptStatus(receipt)
                // A transaction a client reset discarded reads rejected.
                if t.discarded {
                    if status.state != .rejected { throw fail("device \(d.index)'s write receipt \(receipt), discarded by a client reset, reads \(status.state)") }
                    continue
                }
                let named = Set(status.compensatingWrites.compactMap { w -> String? in if case .string(let k) = w.primaryKey { k } else { nil } })
                if denied.isEmpty ? status.state != .acknowledged : (status.state != .rejected || named != denied) {
                    throw fail("device \(d.index)'s write receipt \(receipt) reads \(status.state) \(named.sorted()); its refused writes: \(denied.sorted())")
                }
            }
        }
    }

    /// A receipt never reads acknowledged before the answer that rejects it (checked at every
    /// step, for the transactions with a refused write).
    private func noRejectedReceiptReadsAcknowledged() throws {
        for d in devices {
            for t in d.receipts where !t.denied.isEmpty && !t.discarded && !t.refusalLost {
                let (receipt, denied) = (t.receipt, t.denied)
                if try d.db.receiptStatus(receipt).state == .acknowledged {
                    throw fail("device \(d.index)'s write receipt \(receipt) reads acknowledged, but the server refuses its writes to \(denied.sorted())")
                }
            }
        }
    }

    /// What the server must hold: the starting documents with every logged transaction
    /// applied in commit order, less those a client reset discarded before the server had them.
    func expectedDocs() -> [String: SimDoc] {
        var docs: [String: SimDoc] = oracle
        for e in log {
            if let cut = cutoffs[e.device]?[e.generation], e.version > cut { continue }
            for (key, op) in e.ops {
                var doc = docs[key]
                op.apply(to: &doc)
                docs[key] = doc
            }
        }
        return docs
    }

    /// Transactions a client reset discarded (their receipts read rejected) that the server had
    /// integrated before it forgot the file (their acknowledgement was lost with the
    /// connection): the data is right (the server's state reaches the device), the receipt
    /// is not, and nothing after a terminate can tell. Counted, not failed.
    var discardedButIntegrated: Int {
        devices.reduce(0) { n, d in
            n + d.receipts.filter { r in r.discarded && r.version <= (cutoffs[d.index]?[r.generation] ?? 0) }.count
        }
    }

    static func difference(_ a: [String: SimDoc], _ b: [String: SimDoc], _ an: String, _ bn: String) -> String {
        Set(a.keys).union(b.keys).sorted().compactMap { k in
            a[k] == b[k] ? nil : "  \(k): \(an) \(a[k].map { "\($0)" } ?? "absent"), \(bn) \(b[k].map { "\($0)" } ?? "absent")"
        }.joined(separator: "\n")
    }
}

/// SplitMix64: the seed's whole run follows from it.
struct SimRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Int(z % UInt64(max(bound, 1)))
    }
}

/// The simulation's time: it moves only when the simulation says so.
final class SimClock: Sendable {
    private let now = LockedValue<Int64>(1_800_000_000_000_000_000)
    func advance(by nanoseconds: Int64) { now.withLock { $0 += nanoseconds } }
    var wallClock: WallClock { WallClock { [now] in now.withLock { $0 } } }
    var nanoseconds: Int64 { now.withLock { $0 } }
}

/// One document of the convergence app's `Doc` class (tags are left alone).
struct SimDoc: Equatable, CustomStringConvertible {
    var owner: String
    var title: String
    var counter: Int64
    var rank: Int64
    var description: String { "title=\(title) counter=\(counter) rank=\(rank)" }

    init(owner: String, title: String, counter: Int64, rank: Int64) {
        (self.owner, self.title, self.counter, self.rank) = (owner, title, counter, rank)
    }

    /// Where each property is in a row of `Doc` (the schema decides the order).
    struct Layout {
        let key, owner, title, counter, rank: Int
        init(_ os: ObjectSchema) throws {
            func index(_ name: String) throws -> Int {
                guard let i = os.propertyIndex(named: name) else { throw FerryError(.noSuchProperty, "Doc has no \(name)") }
                return i
            }
            (key, owner, title, counter, rank) = (os.primaryKeyIndex, try index("ownerId"), try index("title"), try index("counter"), try index("rank"))
        }
    }

    init?(row: [FerryValue], _ l: Layout) {
        guard case .string(let o) = row[l.owner], case .string(let t) = row[l.title], case .int(let c) = row[l.counter], case .int(let r) = row[l.rank] else { return nil }
        self.init(owner: o, title: t, counter: c, rank: r)
    }
}

enum SimOp: CustomStringConvertible {
    case create(SimDoc), delete, title(String), rank(Int64), add(Int64)

    var description: String {
        switch self {
        case .create(let d): return "create(\(d))"
        case .delete: return "delete"
        case .title(let t): return "title=\(t)"
        case .rank(let r): return "rank=\(r)"
        case .add(let n): return "counter+=\(n)"
        }
    }

    func apply(to doc: inout SimDoc?) {
        switch self {
        case .create(let d): doc = d
        case .delete: doc = nil
        case .title(let t): doc?.title = t
        case .rank(let r): doc?.rank = r
        case .add(let n): doc?.counter += n
        }
    }
}
