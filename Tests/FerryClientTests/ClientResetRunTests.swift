import FerryCore
@testable import FerryClient
import Testing

/// A client reset's decisions (`ClientResetRun`), without a server or a store: what each mode
/// does with the server's error, when the session stops trying, and when a run is complete.
@Suite struct ClientResetRunTests {
    static let withRecovery = SyncError(code: 208, message: "bad client file", isFatal: true, action: .clientReset)
    static let noRecovery = SyncError(code: 208, message: "bad client file", isFatal: true, action: .clientResetNoRecovery)

    /// (mode, server allows recovery, failures so far) → nil: handed over; else recover?
    @Test func eachModeRunsOrHandsOverAsTheSeedsSay() {
        let cases: [(ClientResetMode, SyncError, UInt64, Bool?)] = [
            (.manual, Self.withRecovery, 0, nil),
            (.recoverUnsyncedChanges, Self.withRecovery, 0, true),
            (.recoverUnsyncedChanges, Self.noRecovery, 0, nil),
            (.recoverOrDiscardUnsyncedChanges, Self.withRecovery, 0, true),
            (.recoverOrDiscardUnsyncedChanges, Self.noRecovery, 0, false),
            // A recovery that failed before is not tried again: discard.
            (.recoverOrDiscardUnsyncedChanges, Self.withRecovery, 1, false),
            (.discardUnsyncedChanges, Self.withRecovery, 0, false),
            (.discardUnsyncedChanges, Self.noRecovery, 2, false),
            // Past the failures allowed, every automatic mode hands the reset over.
            (.discardUnsyncedChanges, Self.withRecovery, ClientResetRun.maxFailures, nil),
            (.recoverUnsyncedChanges, Self.withRecovery, ClientResetRun.maxFailures, nil),
        ]
        for (mode, refusal, failures, recover) in cases {
            do {
                let run = try ClientResetRun.start(refusal, mode: mode, failures: failures)
                #expect(run.recover == recover, "\(mode) \(refusal.action) \(failures)")
                #expect(run.ident == 0 && run.queryVersion == 0 && run.stagedChangesets == 0)
                #expect(run.recover || !run.discardReason.isEmpty, "a discard says why: \(mode)")
            } catch {
                #expect(recover == nil, "\(mode) \(refusal.action) \(failures) was handed over: \(error.message)")
                #expect(error.code == refusal.code && error.message.hasPrefix(refusal.message))
            }
        }
    }

    @Test func whyAResetIsHandedOverIsInItsMessage() {
        func handedOver(_ error: SyncError, _ mode: ClientResetMode, _ failures: UInt64) -> SyncError? {
            do { _ = try ClientResetRun.start(error, mode: mode, failures: failures) } catch { return error }
            return nil
        }
        guard let disabled = handedOver(Self.noRecovery, .recoverUnsyncedChanges, 0),
              let failing = handedOver(Self.withRecovery, .discardUnsyncedChanges, 3),
              let manual = handedOver(Self.withRecovery, .manual, 0) else {
            Issue.record("not handed over")
            return
        }
        #expect(disabled.message.contains("the server disabled recovery"))
        #expect(failing.message.contains("failed 3 times in a row"))
        #expect(manual.message == Self.withRecovery.message)
    }

    @Test func aRunAsksForItsSetAndEndsWithItsLastMessage() throws {
        var run = try ClientResetRun.start(Self.withRecovery, mode: .recoverUnsyncedChanges, failures: 0)
        #expect(run.identified(ident: 7, salt: 9, subscriptionVersion: 3) == .query(version: 3))
        #expect(run.ident == 7 && run.salt == 9 && run.queryVersion == 3)
        #expect(run.staged(2, serverVersion: 10, subscriptionVersion: 3, isLast: false) == .wait)
        // The last message of an older set does not complete this one's download.
        #expect(run.staged(1, serverVersion: 11, subscriptionVersion: 2, isLast: true) == .wait)
        #expect(run.staged(4, serverVersion: 12, subscriptionVersion: 3, isLast: true) == .finish(serverVersion: 12))
        #expect(run.stagedChangesets == 7)
    }

    @Test func aFileWithoutSubscriptionsBecomesEmptyAtOnce() throws {
        var run = try ClientResetRun.start(Self.withRecovery, mode: .discardUnsyncedChanges, failures: 0)
        #expect(run.identified(ident: 4, salt: 1, subscriptionVersion: 0) == .finish(serverVersion: 0))
        #expect(run.queryVersion == 0)
    }
}
