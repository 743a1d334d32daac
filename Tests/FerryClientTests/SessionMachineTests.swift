@testable import FerryClient
import FerryCore
@testable import FerryStore
import Testing

/// The sync session's protocol decisions (`SessionMachine`) without a server, a socket or a
/// store: events in, effects out, in order. The simulation (Tests/FerrySimulationTests) runs
/// the same machine over real stores and a simulated network; these pin each rule alone.
@Suite struct SessionMachineTests {
    static let doc = try! ObjectSchema(name: "Doc", properties: [
        Property(name: "_id", type: .string, isPrimaryKey: true),
        Property(name: "title", type: .string),
    ])

    /// A short name per effect, to compare sequences.
    static func names(_ effects: [SessionEffect]) -> [String] {
        effects.map { e in
            switch e {
            case .send(let m):
                switch m {
                case .bind: return "send BIND"
                case .upload: return "send UPLOAD"
                default: return "send \(m)"
                }
            case .storeIdentity(let i, _): return "store identity \(i)"
            case .ready(let known): return "ready(known: \(known))"
            case .integrate: return "integrate"
            case .answersComplete(let t): return "answers complete through \(t)"
            case .uploaded(let b): return "uploaded \(b) bytes"
            case .completeWaits(let w): return "\(w.count) waits done"
            case .subscriptionCompleted(let v): return "subscription \(v) completed"
            case .downloaded(_, let settled): return settled ? "downloaded" : "downloaded, more expected"
            case .expectDownload: return "expect download"
            case .markAnswered(let w):
                if case .receipts(let t) = w { return "receipts through \(t) answered" }
                return "download wait answered"
            case .storeWriteRules: return "store write rules"
            case let .refused(w, span): return "refused \(w.count) answering \(span.map { "(\($0.after), \($0.through)]" } ?? "nothing")"
            case .subscriptionFailed: return "subscription failed"
            case .report(let e): return "report \(e.code)"
            case .fail(let e): return "fail \(e.code)"
            case .uploadPending: return "upload pending"
            case .beginClientReset: return "begin client reset"
            case .startReset(let run): return "start reset (\(run.recover ? "recover" : "discard"))"
            case .handOverReset: return "hand the reset over"
            case .finishReset(let v): return "finish reset at \(v)"
            case .abandonReset: return "abandon reset"
            case .resetIdentified: return "reset identified"
            case .resetDownloaded: return "reset downloaded"
            }
        }
    }

    static func meta(ident: UInt64, acknowledged: UInt64 = 0, answered: UInt64 = 0, serverVersion: UInt64 = 0) -> SyncMetadata {
        var m = SyncMetadata()
        m.clientFileIdent = ident
        m.clientFileSalt = 99
        m.acknowledged = acknowledged
        m.answered = answered
        m.serverVersion = serverVersion
        return m
    }

    static func pending(_ versions: ClosedRange<UInt64>) -> [PendingChangeset] {
        versions.map { PendingChangeset(version: $0, base: 0, bytes: [1, 2, 3]) }
    }

    static func download(ack: UInt64, serverVersion: UInt64 = 10, subscriptionVersion: UInt64 = 0, isLast: Bool = true) -> ProtocolMessage {
        .download(session: 1, serverVersion: serverVersion, uploadAcknowledged: ack, subscriptionVersion: subscriptionVersion,
                  downloadableBytes: 0, isLastInBatch: isLast, changesets: [DownloadChangeset(serverVersion: serverVersion, originFileIdent: 0, changeset: Self.emptyChangeset)])
    }

    static let emptyChangeset = ChangesetCodec.encode(Changeset(timestamp: 0, instructions: []))

    static func refusal(_ keys: [String]) -> ProtocolMessage {
        .error(ProtocolError(session: 1, code: ProtocolError.Code.compensatingWrite, message: "refused", tryAgain: true, action: .warning,
                             compensatingWrites: keys.map { CompensatingWrite(objectType: "Doc", primaryKey: .string($0), reason: "no") }))
    }

    /// Connected, bound and identified as a known file, with `through` local versions sent.
    static func readyMachine(acknowledged: UInt64 = 0, sentThrough: UInt64) -> SessionMachine {
        var m = SessionMachine(acknowledged: acknowledged, answered: acknowledged)
        m.attached(id: 1)
        _ = m.connected(database: "a", meta: meta(ident: 7, acknowledged: acknowledged, answered: acknowledged), replaysRefusals: true)
        if sentThrough > acknowledged { _ = m.upload(pending(acknowledged + 1...sentThrough)) }
        return m
    }

    /// Integrates a download the way a shell would (no captures), returning every effect.
    static func deliver(_ message: ProtocolMessage, to m: inout SessionMachine) -> [SessionEffect] {
        var out: [SessionEffect] = []
        for e in m.received(message) {
            out.append(e)
            if case .integrate(let d) = e { out += m.integrated(d, captures: []) }
        }
        return out
    }

    @Test func aKnownFileBindsAndIsReadyAtOnce() throws {
        var m = SessionMachine(acknowledged: 3, answered: 2)
        #expect(m.connected(database: "a", meta: Self.meta(ident: 7), replaysRefusals: true).isEmpty, "not attached: no session number to bind under")
        m.attached(id: 4)
        let effects = m.connected(database: "a", meta: Self.meta(ident: 7, acknowledged: 3, answered: 2, serverVersion: 12), replaysRefusals: true)
        #expect(Self.names(effects) == ["send BIND", "ready(known: true)"])
        guard case .send(.bind(4, "a", 7, 99, 12, let answered)) = effects[0] else { Issue.record("\(effects[0])"); return }
        #expect(answered == 2, "a server that replays refusals is told where the answers stop")
        #expect(m.uploadFrom == 3, "uploads start again after what the file holds as acknowledged")
        // A server that does not replay refusals is not sent the field it cannot read.
        m.connectionLost()
        let older = m.connected(database: "a", meta: Self.meta(ident: 7, acknowledged: 3, answered: 2), replaysRefusals: false)
        guard case .send(.bind(_, _, _, _, _, nil)) = older[0] else { Issue.record("\(older[0])"); return }
    }

    @Test func aNewFileUploadsOnlyOnceItHasItsIdentity() {
        var m = SessionMachine(acknowledged: 0)
        m.attached(id: 1)
        let effects = m.connected(database: "a", meta: Self.meta(ident: 0), replaysRefusals: true)
        #expect(Self.names(effects) == ["send BIND"])
        guard case .send(.bind(_, _, 0, _, _, nil)) = effects[0] else { Issue.record("\(effects[0])"); return }
        #expect(m.uploadFrom == nil && m.upload(Self.pending(1...2)) == nil, "nothing is uploaded before IDENT")
        #expect(Self.names(m.received(.ident(session: 1, clientFileIdent: 8, clientFileSalt: 5))) == ["store identity 8", "ready(known: false)"])
        #expect(m.uploadFrom == 0)
    }

    @Test func uploadsGoOutOnlyWhileReadyAndMarkWhatWasSent() {
        var m = Self.readyMachine(sentThrough: 0)
        guard case .upload(1, let changesets)? = m.upload(Self.pending(1...3)) else { Issue.record("no upload"); return }
        #expect(changesets.map(\.clientVersion) == [1, 2, 3])
        #expect(m.uploadFrom == 3 && m.uploads.lastUploaded == 3)
        #expect(m.upload([]) == nil, "nothing to send")
        m.connectionLost()
        #expect(m.uploadFrom == nil && m.upload(Self.pending(4...4)) == nil, "no upload without a connection")
        _ = m.connected(database: "a", meta: Self.meta(ident: 7, acknowledged: 1, answered: 1), replaysRefusals: true)
        #expect(m.uploadFrom == 1, "a new connection sends again after the stored acknowledgement")
    }

    @Test func aDownloadIsIntegratedThenItsAcknowledgementSettlesTheAnswersBeforeIt() {
        var m = Self.readyMachine(sentThrough: 5)
        let first = m.received(Self.download(ack: 3, subscriptionVersion: 2))
        guard case .integrate(let d) = first.first, first.count == 1 else { Issue.record("\(Self.names(first))"); return }
        #expect(d.acknowledged == 3 && d.captureFloor == 0 && d.answeredThrough == 0 && d.isLast && d.bytes == UInt64(Self.emptyChangeset.count))
        #expect(Self.names(m.integrated(d, captures: [])) == ["answers complete through 0", "uploaded 0 bytes", "subscription 2 completed", "downloaded"])
        // The next acknowledgement completes the answers through the one before it (a 231 for
        // that upload would have come first), and captures reverts of writes after it.
        let next = m.received(Self.download(ack: 5, isLast: false))
        guard case .integrate(let d2) = next.first else { Issue.record("\(Self.names(next))"); return }
        #expect(d2.captureFloor == 3 && d2.answeredThrough == 3)
        #expect(Self.names(m.integrated(d2, captures: [])) == ["answers complete through 3", "uploaded 0 bytes", "downloaded, more expected"])
        // One that does not move the acknowledgement settles nothing, and may still carry the
        // last answer's reverts: it captures from the acknowledgement before.
        let same = m.received(Self.download(ack: 5))
        guard case .integrate(let d3) = same.first else { Issue.record("\(Self.names(same))"); return }
        #expect(d3.captureFloor == 3 && d3.answeredThrough == nil)
        #expect(Self.names(m.integrated(d3, captures: [])) == ["uploaded 0 bytes", "subscription 0 completed", "downloaded"])
    }

    @Test func aCompensatingWriteAnswersTheLastAcknowledgedUploadAndClaimsItsCaptures() {
        var m = Self.readyMachine(sentThrough: 4)
        _ = Self.deliver(Self.download(ack: 2), to: &m)
        // The download that acknowledges 4 carries the revert of "x": the store captured it.
        let effects = m.received(Self.download(ack: 4))
        guard case .integrate(let d) = effects.first else { Issue.record("\(Self.names(effects))"); return }
        let create = Instruction.create(table: "Doc", key: .string("x"), fields: [FieldValue(name: "title", value: .string("mine"))])
        let capture = RevertCapture(objectSchema: Self.doc, primaryKey: .string("x"), before: [.string("x"), .string("mine")], after: nil,
                                    writes: [LocalWrite(version: 3, instruction: create)])
        _ = m.integrated(d, captures: [capture])
        let answer = m.received(Self.refusal(["x", "y"]))
        #expect(Self.names(answer) == ["refused 2 answering (2, 4]", "report \(ProtocolError.Code.compensatingWrite)"])
        guard case .report(let error) = answer.last else { return }
        #expect(!error.isFatal)
        #expect(error.revertedObjects.map(\.primaryKey) == [.string("x")], "the capture of x is handed over; y had none")
        #expect(error.revertedObjects.first?.revert == .removed)
        // Claimed once: the error sent again (a lost connection) hands nothing over twice, and
        // answers the same span, which the 231 completed.
        let again = m.received(Self.refusal(["x"]))
        guard case .report(let repeated) = again.last else { Issue.record("\(Self.names(again))"); return }
        #expect(repeated.revertedObjects.isEmpty)
    }

    @Test func aCompensatingWriteBeforeAnyAcknowledgementAnswersNothing() {
        var m = Self.readyMachine(sentThrough: 2)
        #expect(Self.names(m.received(Self.refusal(["x"]))) == ["refused 1 answering nothing", "report \(ProtocolError.Code.compensatingWrite)"])
    }

    @Test func errorsAreReportedOrStopTheSessionAsTheServerSays() {
        var m = Self.readyMachine(sentThrough: 0)
        let warning = ProtocolError(session: 1, code: ProtocolError.Code.overloaded, message: "slow down", tryAgain: false, action: .warning)
        #expect(Self.names(m.received(.error(warning))) == ["report \(ProtocolError.Code.overloaded)"])
        let badQuery = ProtocolError(session: 1, code: ProtocolError.Code.badQuery, message: "no", tryAgain: true, action: .applicationBug)
        #expect(Self.names(m.received(.error(badQuery))) == ["subscription failed", "report \(ProtocolError.Code.badQuery)"])
        let fatal = ProtocolError(session: 1, code: ProtocolError.Code.syncDisabled, message: "off", tryAgain: false, action: .applicationBug)
        #expect(Self.names(m.received(.error(fatal))) == ["fail \(ProtocolError.Code.syncDisabled)"])
        let reset = ProtocolError(session: 1, code: ProtocolError.Code.badClientFile, message: "reset", tryAgain: false, action: .clientReset)
        #expect(Self.names(m.received(.error(reset))) == ["begin client reset"])
    }

    @Test func whileAResetRunsItsIdentityAndDownloadsAreTheResetsAndStaleRefusalsAreIgnored() {
        var m = Self.readyMachine(sentThrough: 0)
        m.reset = ClientResetRun(error: SyncError(code: ProtocolError.Code.badClientFile, message: "reset", isFatal: true, action: .clientReset), recover: true, discardReason: "")
        #expect(Self.names(m.received(.ident(session: 1, clientFileIdent: 9, clientFileSalt: 1))) == ["reset identified"])
        #expect(Self.names(m.received(Self.download(ack: 0))) == ["reset downloaded"])
        let stale = ProtocolError(session: 1, code: ProtocolError.Code.sessionNotBound, message: "not bound", tryAgain: false, action: .protocolViolation)
        #expect(m.received(.error(stale)).isEmpty)
        m.reset = nil
        #expect(Self.names(m.received(.error(stale))) == ["fail \(ProtocolError.Code.sessionNotBound)"])
    }

    @Test func marksWaitForAConnectionAndALostOneIsSentAgainUnderANewId() {
        var m = SessionMachine(acknowledged: 0)
        m.attached(id: 1)
        #expect(m.mark(.download { _ in }).isEmpty, "not ready: kept for the connection")
        _ = m.connected(database: "a", meta: Self.meta(ident: 7), replaysRefusals: true)
        let sent = m.unsentMarks()
        guard case .send(.mark(1, let first))? = sent.first, sent.count == 1 else { Issue.record("\(Self.names(sent))"); return }
        m.connectionLost()
        _ = m.connected(database: "a", meta: Self.meta(ident: 7), replaysRefusals: true)
        let again = m.unsentMarks()
        guard case .send(.mark(1, let second))? = again.first else { Issue.record("\(Self.names(again))"); return }
        #expect(second > first, "ids are never reused")
        #expect(m.received(.mark(session: 1, request: first)).isEmpty, "the lost connection's answer completes nothing")
        #expect(Self.names(m.received(.mark(session: 1, request: second))) == ["download wait answered"])
        #expect(m.received(.mark(session: 1, request: second)).isEmpty, "answered once")
    }

    @Test func oneReceiptMarkAtATimeAfterWhatWasUploaded() {
        var m = Self.readyMachine(sentThrough: 4)
        let effects = m.receiptMark()
        guard case .send(.mark(1, let request))? = effects.first else { Issue.record("\(Self.names(effects))"); return }
        #expect(m.receiptMark().isEmpty, "one is out")
        #expect(Self.names(m.received(.mark(session: 1, request: request))) == ["receipts through 4 answered"])
        #expect(!m.receiptMark().isEmpty, "the next may go once it is answered")
        m.connectionLost()
        #expect(m.receiptMark().isEmpty, "none while not ready")
    }

    @Test func uploadWaitsCompleteWhenTheAcknowledgementReachesThem() {
        var m = Self.readyMachine(sentThrough: 0)
        #expect(m.committed([(version: 1, bytes: 100), (version: 2, bytes: 50), (version: 3, bytes: 25)]) == 175)
        #expect(m.committed([(version: 2, bytes: 50)]) == 0, "counted once")
        _ = m.upload(Self.pending(1...3))
        #expect(Self.names(m.waitForUpload(through: 0) { _ in }) == ["1 waits done"], "nothing to wait for: at once")
        #expect(m.waitForUpload(through: 2) { _ in }.isEmpty && m.waitForUpload(through: 3) { _ in }.isEmpty)
        #expect(Self.names(Self.deliver(Self.download(ack: 2), to: &m)) == ["integrate", "answers complete through 0", "uploaded 150 bytes",
                                                                           "subscription 0 completed", "downloaded", "1 waits done"])
        #expect(Self.names(Self.deliver(Self.download(ack: 3), to: &m)).suffix(2) == ["downloaded", "1 waits done"])
        #expect(m.waits.takeUploads().isEmpty)
    }

    @Test func aSuspendedSessionBindsNothingUntilResumedAndKeepsItsWaits() {
        var m = Self.readyMachine(sentThrough: 0)
        #expect(m.mark(.download { _ in }).count == 1)
        #expect(m.suspend() && !m.suspend(), "once")
        #expect(m.paused && !m.ready && m.uploadFrom == nil)
        #expect(m.connected(database: "a", meta: Self.meta(ident: 7), replaysRefusals: true).isEmpty, "no BIND while suspended")
        #expect(m.resume() && !m.resume())
        #expect(Self.names(m.connected(database: "a", meta: Self.meta(ident: 7), replaysRefusals: true)) == ["send BIND", "ready(known: true)"])
        #expect(m.unsentMarks().count == 1, "the wait's MARK is sent again")
    }

    static let resetError = SyncError(code: ProtocolError.Code.badClientFile, message: "reset", isFatal: true, action: .clientReset)

    @Test func aResetBindsTheFileAgainAsANewOneAndAsksForItsSetsData() {
        var m = Self.readyMachine(sentThrough: 2)
        #expect(m.mark(.download { _ in }).count == 1)
        let start = m.beginReset(Self.resetError, mode: .recoverUnsyncedChanges, failures: 0, database: "a")
        #expect(Self.names(start) == ["start reset (recover)", "send BIND"])
        guard case .send(.bind(1, "a", 0, 0, 0, nil)) = start[1] else { Issue.record("\(start[1])"); return }
        #expect(!m.ready && m.uploadFrom == nil, "nothing is uploaded under the refused identity")
        #expect(m.unsentMarks().isEmpty && m.marks.takeAll().count == 1, "the MARK is held back, not answered by the old identity")
        #expect(Self.names(m.received(.ident(session: 1, clientFileIdent: 9, clientFileSalt: 3))) == ["reset identified"])
        let subs = [Subscription(name: "all", objectType: "Doc", query: "TRUEPREDICATE")]
        let ask = m.resetIdentified(ident: 9, salt: 3, version: 4, subscriptions: subs)
        guard case .send(.query(1, 4, subs))? = ask.first else { Issue.record("\(Self.names(ask))"); return }
        #expect(m.resetStaged(2, serverVersion: 30, subscriptionVersion: 4, isLast: false).isEmpty, "more to come")
        #expect(m.resetStaged(0, serverVersion: 30, subscriptionVersion: 3, isLast: true).isEmpty, "an older set's batch completes nothing")
        #expect(Self.names(m.resetStaged(1, serverVersion: 31, subscriptionVersion: 4, isLast: true)) == ["finish reset at 31"])
        let run = m.takeResetToFinish()
        #expect(run?.ident == 9 && run?.stagedChangesets == 3 && run?.queryVersion == 4 && m.reset == nil)
    }

    @Test func aFileWithoutSubscriptionsFinishesItsResetAtOnce() {
        var m = Self.readyMachine(sentThrough: 0)
        _ = m.beginReset(Self.resetError, mode: .discardUnsyncedChanges, failures: 0, database: "a")
        #expect(Self.names(m.resetIdentified(ident: 9, salt: 3, version: 0, subscriptions: [])) == ["finish reset at 0"])
    }

    @Test func aResetTheModeForbidsOrThatFailedTooOftenIsTheHosts() {
        var m = Self.readyMachine(sentThrough: 0)
        #expect(Self.names(m.beginReset(Self.resetError, mode: .manual, failures: 0, database: "a")) == ["hand the reset over"])
        #expect(Self.names(m.beginReset(Self.resetError, mode: .recoverOrDiscardUnsyncedChanges, failures: ClientResetRun.maxFailures, database: "a")) == ["hand the reset over"])
        #expect(m.reset == nil && m.ready, "nothing changed")
    }

    @Test func aMalformedFreshStateEndsTheRun() {
        var m = Self.readyMachine(sentThrough: 0)
        _ = m.beginReset(Self.resetError, mode: .discardUnsyncedChanges, failures: 0, database: "a")
        let bad = ProtocolMessage.download(session: 1, serverVersion: 5, uploadAcknowledged: 0, subscriptionVersion: 1, downloadableBytes: 0,
                                           isLastInBatch: true, changesets: [DownloadChangeset(serverVersion: 5, originFileIdent: 0, changeset: [0xff, 0xff, 0xff])])
        #expect(Self.names(m.received(bad)) == ["abandon reset", "fail \(ProtocolError.Code.badChangeset)"])
        #expect(m.reset == nil)
    }

    @Test func afterTheResetTheSessionSyncsOnAsTheNewFile() {
        var m = Self.readyMachine(sentThrough: 3)
        #expect(m.committed([(version: 1, bytes: 10), (version: 2, bytes: 10), (version: 3, bytes: 10)]) == 30)
        #expect(m.waitForUpload(through: 3) { _ in }.isEmpty)
        _ = m.beginReset(Self.resetError, mode: .discardUnsyncedChanges, failures: 0, database: "a")
        _ = m.takeResetToFinish()
        // Discarded: the new history's last version is acknowledged, nothing waits.
        #expect(Self.names(m.resetApplied(acknowledged: 3, latest: 3, queryVersion: 2)) == ["uploaded 30 bytes", "subscription 2 completed"])
        #expect(Self.names(m.resetDone()) == ["upload pending", "1 waits done"])
        #expect(m.ready && m.uploadFrom == 3)
    }

    @Test func theSetIsSentOncePerConnectionAfterTheSetTheDataReflectsIfThatIsOlder() {
        var m = SessionMachine(acknowledged: 0)
        m.attached(id: 1)
        #expect(!m.wantsQuery(version: 3), "not ready")
        _ = m.connected(database: "a", meta: Self.meta(ident: 7), replaysRefusals: true)
        #expect(!m.wantsQuery(version: 0), "no set")
        let all = [Subscription(name: "all", objectType: "Doc", query: "TRUEPREDICATE")]
        let few = [Subscription(name: "few", objectType: "Doc", query: "rank <= 1")]
        #expect(SessionMachine.namesReflectedFirst(bound: true, pending: true) && !SessionMachine.namesReflectedFirst(bound: true, pending: false)
                && !SessionMachine.namesReflectedFirst(bound: false, pending: true))
        let first = m.query(version: 3, subscriptions: all, reflected: (version: 2, subscriptions: few))
        #expect(Self.names(first) == ["send \(ProtocolMessage.query(session: 1, version: 2, subscriptions: few))", "expect download",
                                      "send \(ProtocolMessage.query(session: 1, version: 3, subscriptions: all))"])
        #expect(m.sentQueryVersion == 3 && !m.wantsQuery(version: 3) && m.query(version: 3, subscriptions: all, reflected: nil).isEmpty, "sent once")
        // A download of an older set's batch leaves the download progress expecting more.
        let effects = Self.deliver(Self.download(ack: 0, subscriptionVersion: 2), to: &m)
        #expect(Self.names(effects).contains("downloaded, more expected"))
        // A new connection sends it again; a reflected set as new as it is not named.
        m.connectionLost()
        _ = m.connected(database: "a", meta: Self.meta(ident: 7), replaysRefusals: true)
        #expect(Self.names(m.query(version: 3, subscriptions: all, reflected: (version: 3, subscriptions: all))).count == 2)
    }

    @Test func aClosedSessionDecidesNothing() {
        var m = Self.readyMachine(sentThrough: 0)
        _ = m.life.close()
        #expect(m.received(Self.download(ack: 0)).isEmpty && m.received(.mark(session: 1, request: 1)).isEmpty)
        #expect(m.uploadFrom == nil)
    }

    @Test func aDownloadTheStoreCannotReadStopsTheSessionAsAProtocolViolation() {
        let malformed = SessionMachine.integrationFailed(MalformedDownload(reason: "bad"), database: "a")
        #expect(malformed.code == ProtocolError.Code.badChangeset && malformed.action == .protocolViolation && malformed.isFatal)
        let local = SessionMachine.integrationFailed(FerryError(.io, "disk"), database: "a")
        #expect(local.code == ProtocolError.Code.local && local.action == .applicationBug)
    }
}
