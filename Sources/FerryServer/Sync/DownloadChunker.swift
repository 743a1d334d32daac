import FerryCore

/// Cuts a stream of instructions into changesets of about `SyncHub.downloadChunkBytes`, the
/// same way every time for the same instructions (a streamed bootstrap measures its messages
/// in one pass and sends them in another).
struct DownloadChunker {
    private var writer = ChangesetWriter(capacity: 4096)
    private var pending = 0

    /// Adds an instruction; returns a changeset when this one filled it.
    mutating func add(_ i: Instruction) -> [UInt8]? {
        writer.append(i)
        pending += 1
        return writer.byteCount >= SyncHub.downloadChunkBytes ? cut() : nil
    }

    /// The changeset of what was added since the last cut, if anything was.
    mutating func cut() -> [UInt8]? {
        guard pending > 0 else { return nil }
        let chunk = writer.finish(timestamp: 0)
        writer = ChangesetWriter(capacity: 4096)
        pending = 0
        return chunk
    }
}
