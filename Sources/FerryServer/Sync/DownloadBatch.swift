import FerryCore

/// Collects the instructions of one download and cuts them into DOWNLOAD messages of about
/// `SyncHub.downloadChunkBytes` each; the last one is flagged, and every one says how many
/// bytes are still to come (the client's download progress).
struct DownloadBatch {
    let session: UInt64
    private var chunks: [[UInt8]] = []
    private var chunker = DownloadChunker()
    private var hasPending = false

    init(session: UInt64) {
        self.session = session
    }

    /// A batch of chunks encoded before (one commit's instructions for several sessions).
    init(session: UInt64, sealed chunks: [[UInt8]]) {
        self.init(session: session)
        self.chunks = chunks
    }

    var isEmpty: Bool { chunks.isEmpty && !hasPending }

    /// The encoded chunks, to send the same instructions to other sessions.
    mutating func sealed() -> [[UInt8]] {
        cut()
        return chunks
    }

    mutating func add(_ i: Instruction) {
        hasPending = true
        if let c = chunker.add(i) {
            chunks.append(c)
            hasPending = false
        }
    }

    private mutating func cut() {
        if let c = chunker.cut() { chunks.append(c) }
        hasPending = false
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
