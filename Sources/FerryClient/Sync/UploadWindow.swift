/// What a sync session has sent and what the server has acknowledged, as versions of the local
/// history (issue 25: the session's state as values whose invariants are written down). Pure:
/// the session asks it what to send and what a download's acknowledgement means, and does the
/// I/O. The simulation (Tests/FerrySimulationTests) drives its devices with it too.
///
/// Invariants:
/// - `ackFloor <= acknowledged`, and neither ever goes back;
/// - `lastAcknowledgement`, when set, ends at `acknowledged` (`through == acknowledged`) and starts
///   at the acknowledgement before it (`after == ackFloor`), except on a new connection of a
///   file without every answer: there it starts at the version the file has every answer
///   through (`answered`), before the connection's first acknowledgement and for that one,
///   since a server that keeps refusals sends the missing ones again right after the BIND
///   with the acknowledgement (`RefusalLedger`): what that acknowledgement completes starts
///   there too (`acknowledge` returns it);
/// - on a connection, `lastUploaded` starts at the acknowledgement the file holds (everything
///   after it is sent again: the server drops what it already has) and only grows.
package struct UploadWindow: Sendable, Equatable {
    /// The local versions one acknowledgement covered: (after, through].
    package struct Span: Sendable, Equatable {
        package let after: UInt64
        package let through: UInt64
    }

    /// The last local version sent on this connection.
    package private(set) var lastUploaded: UInt64
    /// The last local version the server acknowledged (durable there).
    package private(set) var acknowledged: UInt64
    /// The acknowledgement before the last one moved: the writes of the upload a revert answers
    /// are after it (SPEC F-NOLOSS).
    package private(set) var ackFloor: UInt64
    /// What the last acknowledgement covered: the changesets a following compensating write
    /// (error 231) answers.
    package private(set) var lastAcknowledgement: Span?
    /// On a connection whose file lacks some answers: the version it has every answer through,
    /// until the connection's first acknowledgement.
    private var answeredFloor: UInt64?

    /// A session opening a file whose stored acknowledgement is `acknowledged`, with every
    /// answer (compensating writes included) through `answered`.
    package init(acknowledged: UInt64, answered: UInt64? = nil) {
        lastUploaded = acknowledged
        self.acknowledged = acknowledged
        ackFloor = acknowledged
        awaitAnswers(after: answered)
    }

    /// The file has every answer through `answered` only: a 231 sent again answers from there.
    private mutating func awaitAnswers(after answered: UInt64?) {
        guard let answered, answered < acknowledged else { return }
        lastAcknowledgement = Span(after: answered, through: acknowledged)
        answeredFloor = answered
    }

    /// A new connection: uploads start again after what the file holds as acknowledged
    /// (`stored`), which another process or an earlier connection may have moved.
    /// `answered`: the version the file has every answer through (`SyncMetadata.answered`).
    package mutating func connected(stored: UInt64, answered: UInt64? = nil) {
        acknowledged = max(acknowledged, stored)
        lastUploaded = stored
        awaitAnswers(after: answered)
    }

    /// Another process's acknowledgement, read when this one becomes the sync agent.
    package mutating func adopt(stored: UInt64) {
        acknowledged = max(acknowledged, stored)
    }

    /// Changesets through `version` were sent.
    package mutating func sent(through version: UInt64) {
        lastUploaded = max(lastUploaded, version)
    }

    /// The local version after which a download carrying `ack` captures the device's writes:
    /// one that moves the acknowledgement answers an upload whose writes are after the current
    /// acknowledgement; one that does not may still carry that answer's reverts.
    package func captureFloor(for ack: UInt64) -> UInt64 {
        ack > acknowledged ? acknowledged : ackFloor
    }

    /// An error 231 answered `lastAcknowledgement`: every answer through it is in, so the next
    /// acknowledgement completes from the one before it again.
    package mutating func refusalArrived() {
        if let span = lastAcknowledgement, span.through >= acknowledged { answeredFloor = nil }
    }

    /// What `acknowledge(ack)` would return, without moving anything (the store keeps it with
    /// the download: `SyncMetadata.answered`).
    package func answersComplete(for ack: UInt64) -> UInt64? {
        ack > acknowledged ? min(acknowledged, answeredFloor ?? acknowledged) : nil
    }

    /// A download acknowledged local versions through `ack`. Returns, when it moved, the
    /// version through which the answers are now complete: the acknowledgement before it (a
    /// 231 for that upload came before), or, for a connection's first acknowledgement of a file
    /// lacking answers, the version it had every answer through. Nil: it did not move.
    @discardableResult
    package mutating func acknowledge(_ ack: UInt64) -> UInt64? {
        guard ack > acknowledged else { return nil }
        let previous = acknowledged
        let complete = min(previous, answeredFloor ?? previous)
        answeredFloor = nil
        ackFloor = previous
        lastAcknowledgement = Span(after: complete, through: ack)
        acknowledged = ack
        return complete
    }

    /// After a client reset: the file's new history starts at `stored`, all of it acknowledged.
    package mutating func reset(to stored: UInt64) {
        acknowledged = stored
        lastUploaded = stored
    }
}

/// The upload progress's count (SPEC F-PROGRESS): the sizes of the local changesets counted as
/// uploadable and not yet acknowledged, oldest first. Pure: the session feeds it the sizes it
/// reads and the acknowledgements it gets, and passes on the bytes it returns.
package struct UploadProgressCount: Sendable, Equatable {
    /// The last local version counted.
    package private(set) var countedThrough: UInt64
    private var sizes: [UInt64] = []
    private var versions: [UInt64] = []
    private var head = 0

    package init(countedThrough: UInt64) { self.countedThrough = countedThrough }

    /// Counts changesets not counted yet (`(version, bytes)`, in version order; older ones are
    /// ignored). Returns the bytes added.
    package mutating func count(_ changesets: [(version: UInt64, bytes: UInt64)]) -> UInt64 {
        var added: UInt64 = 0
        for c in changesets where c.version > countedThrough {
            versions.append(c.version)
            sizes.append(c.bytes)
            added += c.bytes
            countedThrough = c.version
        }
        return added
    }

    /// The server acknowledged through `ack`: returns the bytes that now count as uploaded.
    package mutating func acknowledged(through ack: UInt64) -> UInt64 {
        var bytes: UInt64 = 0
        while head < versions.count, versions[head] <= ack {
            bytes += sizes[head]
            head += 1
        }
        // Bounded memory: the acknowledged prefix is dropped once it is most of the arrays.
        if head > 1024, head * 2 > versions.count {
            versions.removeFirst(head)
            sizes.removeFirst(head)
            head = 0
        }
        return bytes
    }
}
