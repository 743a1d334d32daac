import FerryCore
import Testing

/// The server's bind policy (`BindRules`), decided from values alone: every branch, the order
/// of the checks, and the boundaries of the maximum offline time and of the head.
@Suite struct BindRulesTests {
    let day: Int = 86_400
    let now: Int = 1_800_000_000

    func decide(_ file: BindRules.KnownFile?, version: UInt64 = 5, head: UInt64 = 10, maxOfflineDays: Int = 30) -> BindRules.Decision {
        BindRules.decide(ident: 7, file: file, lastServerVersion: version, head: head, now: now, maxOfflineDays: maxOfflineDays)
    }

    func known(salt: Bool = true, user: Bool = true, lastSeenDaysAgo: Int? = 1) -> BindRules.KnownFile {
        BindRules.KnownFile(saltMatches: salt, sameUser: user, lastSeen: lastSeenDaysAgo.map { now - $0 * day } ?? 0)
    }

    @Test func aKnownFileWithinEveryLimitBinds() {
        #expect(decide(known()) == .bind)
        #expect(decide(known(), version: 10, head: 10) == .bind)
        #expect(decide(known(), version: 0, head: 0) == .bind)
    }

    @Test func anUnknownFileOrAnotherSaltResets() {
        #expect(decide(nil) == .reset(.unknownClientFile, message: "the server does not know client file 7: the device must reset"))
        #expect(decide(known(salt: false)) == decide(nil))
        // Before any other check: a forgotten file's user is not compared.
        #expect(decide(known(salt: false, user: false)) == decide(nil))
    }

    @Test func anotherUsersFileIsRefusedNotReset() {
        #expect(decide(known(user: false)) == .refuse(message: "client file 7 belongs to another user"))
        // Even when it would also be too old or ahead: never a reset of another user's file.
        #expect(decide(known(user: false, lastSeenDaysAgo: 90), version: 99) == .refuse(message: "client file 7 belongs to another user"))
    }

    @Test func offlineLongerThanTheMaximumResets() {
        #expect(decide(known(lastSeenDaysAgo: 31)) == .reset(.maxOfflineTime, message:
            "client file 7 was last seen 31 days ago, longer than the client maximum offline time of 30 days: the device must reset"))
        // Exactly the maximum is still within it.
        #expect(decide(known(lastSeenDaysAgo: 30)) == .bind)
        // No maximum, or never seen: no limit applies.
        #expect(decide(known(lastSeenDaysAgo: 400), maxOfflineDays: 0) == .bind)
        #expect(decide(known(lastSeenDaysAgo: nil)) == .bind)
        // Checked before the head: a file that is both too old and ahead is forgotten.
        if case .reset(let reason, _) = decide(known(lastSeenDaysAgo: 31), version: 11) { #expect(reason == .maxOfflineTime) } else { Issue.record("not a reset") }
    }

    @Test func aVersionPastTheHeadResets() {
        #expect(decide(known(), version: 11, head: 10) == .reset(.serverVersionAhead, message:
            "the client has server version 11, newer than the server's 10: the device must reset"))
    }

    @Test func theResetActionFollowsTheRecoverySetting() {
        #expect(BindRules.resetAction(recoveryDisabled: false) == .clientReset)
        #expect(BindRules.resetAction(recoveryDisabled: true) == .clientResetNoRecovery)
        #expect(BindRules.ResetReason.allCases.map(\.rawValue) == ["unknown_client_file", "max_offline_time", "server_version_ahead"])
    }
}
