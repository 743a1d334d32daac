import FerryCore

/// The sync engine's staging of a client reset's fresh download (`ResetDownloadStaging`):
/// each DOWNLOAD message is appended in a small transaction of its own as it arrives, and
/// `resetToServerState(target:recover:discardReason:)` reads it back and clears it. A download
/// that is abandoned (lost connection, closed session, failed reset) is cleared by the engine;
/// one left by a crash is cleared when the next reset run starts.
extension Database {
    /// Appends the changesets of one DOWNLOAD message of a reset's fresh state, in order, in one
    /// transaction. The caller has checked that they decode.
    package func stageResetDownload(_ changesets: [[UInt8]]) throws {
        try writingStore { c in
            try c.exec(ResetDownloadStaging.createSQL)
            let s = try c.statement("INSERT INTO __ferry_reset_download (changeset) VALUES (?)")
            defer { s.resetKeepingBindings() }
            for bytes in changesets {
                s.bind(1, blob: bytes)
                try s.run()
                s.resetKeepingBindings()
            }
            return nil
        }
    }

    /// Removes every staged changeset. Writes only when something is staged, so calling it at
    /// the start of every reset run (and at every session start) costs a read.
    package func clearStagedResetDownload() throws {
        guard try stagedResetChangesetCount() > 0 else { return }
        try writingStore { c in
            try c.exec("DELETE FROM __ferry_reset_download")
            return nil
        }
    }

    /// How many changesets of a reset's download are staged in the file.
    package func stagedResetChangesetCount() throws -> Int {
        try readingStore { c in try ResetDownloadStaging.count(c) }
    }
}
