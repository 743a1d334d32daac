@testable import FerryServer
import FerrySyncStorage
import Testing

/// The admin's transitions of the sync state (`SyncAdminRules`), from the modes alone: every
/// action from every mode, before and after the store's write. The admin API tests run the
/// same paths against a live server (AdminAPITests, PauseSyncTests).
@Suite struct SyncAdminRulesTests {
    typealias Rules = SyncAdminRules

    @Test func whatEachActionIsAllowedFromEachMode() {
        let table: [(Rules.Action, SyncState.Mode, String)] = [
            (.terminate, .enabled, "proceed"), (.terminate, .paused, "proceed"), (.terminate, .terminated, "proceed"),
            (.enable, .enabled, "unchanged"), (.enable, .paused, "conflict paused"), (.enable, .terminated, "proceed"),
            (.pause, .enabled, "proceed"), (.pause, .paused, "proceed"), (.pause, .terminated, "proceed"),
            (.resume, .enabled, "conflict enabled"), (.resume, .paused, "proceed"), (.resume, .terminated, "conflict terminated"),
        ]
        #expect(table.count == Rules.Action.allCases.count * 3)
        for (action, mode, expected) in table {
            let got = switch Rules.precheck(action, current: mode) {
            case .proceed: "proceed"
            case .unchanged: "unchanged"
            case .conflict(let m, let message): message.isEmpty ? "empty message" : "conflict \(m.rawValue)"
            }
            #expect(got == expected, "\(action) from \(mode)")
        }
    }

    @Test func eventsAreRecordedOnlyForRealChanges() {
        #expect(Rules.outcome(.terminate, before: .enabled, after: .terminated).event?.kind == "sync_terminated")
        #expect(Rules.outcome(.terminate, before: .paused, after: .terminated).event?.message == "sync terminated by an admin while paused")
        #expect(Rules.outcome(.terminate, before: .terminated, after: .terminated) == Rules.Outcome())
        #expect(Rules.outcome(.enable, before: .terminated, after: .enabled).event?.kind == "sync_enabled")
        #expect(Rules.outcome(.pause, before: .enabled, after: .paused).event?.kind == "sync_paused")
        // Pausing a paused app changes nothing and records nothing.
        #expect(Rules.outcome(.pause, before: .paused, after: .paused) == Rules.Outcome())
        #expect(Rules.outcome(.resume, before: .paused, after: .enabled).event?.kind == "sync_resumed")
    }

    @Test func anotherAdminsChangeInBetweenIsAConflictAfterTheWrite() {
        // A pause of terminated sync: the store keeps it terminated.
        #expect(Rules.outcome(.pause, before: .terminated, after: .terminated).conflict?.mode == .terminated)
        // Another admin paused between the read and the enable.
        let enable = Rules.outcome(.enable, before: .terminated, after: .paused)
        #expect(enable.conflict == .init(mode: .paused, message: Rules.enableWhilePausedMessage) && enable.event == nil)
        // Terminated by another admin while resuming.
        let resume = Rules.outcome(.resume, before: .paused, after: .terminated)
        #expect(resume.conflict?.mode == .terminated && resume.event == nil)
        // Resumed by another admin while pausing: no conflict, no event.
        #expect(Rules.outcome(.pause, before: .enabled, after: .enabled) == Rules.Outcome())
    }
}
