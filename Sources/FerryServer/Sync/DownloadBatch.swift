import FerryCore

/// Collects the instructions of one download and cuts them into DOWNLOAD messages of about
/// `SyncHub.downloadChunkBytes` each; the last one is flagged, and every one says how many
/// bytes are still to come (the client's download progress).
struct DownloadBatch {
    let session: UInt64
    private var chunks: [[UInt8]] = []
    private var writer = ChangesetWriter(capacity: 4096)
    private var pending = 0
    private var timestamp: Int64

    init(session: UInt64) {
        self.session = session
        self.timestamp = 0
    }

    var isEmpty: Bool { chunks.isEmpty && pending == 0 }

    mutating func add(_ i: Instruction) {
        writer.append(i)
        pending += 1
        if writer.byteCount >= SyncHub.downloadChunkBytes { cut() }
    }

    private mutating func cut() {
        guard pending > 0 else { return }
        chunks.append(writer.finish(timestamp: timestamp))
        writer = ChangesetWriter(capacity: 4096)
        pending = 0
    }

    mutating func finish(serverVersion: UInt64, acknowledged: UInt64, subscriptionVersion: UInt64, to outbox: ConnectionOutbox) {
        cut()
        var remaining = UInt64(chunks.reduce(0) { $0 + $1.count })
        if chunks.isEmpty {
            outbox.send(.download(session: session, serverVersion: serverVersion, uploadAcknowledged: acknowledged, subscriptionVersion: subscriptionVersion,
                                  downloadableBytes: 0, isLastInBatch: true, changesets: []))
            return
        }
        for (n, c) in chunks.enumerated() {
            remaining -= UInt64(c.count)
            outbox.send(.download(session: session, serverVersion: serverVersion, uploadAcknowledged: acknowledged, subscriptionVersion: subscriptionVersion,
                                  downloadableBytes: remaining, isLastInBatch: n == chunks.count - 1,
                                  changesets: [DownloadChangeset(serverVersion: serverVersion, originFileIdent: 0, changeset: c)]))
        }
    }
}
