import FerryTestSupport
import FerryCore
import FerrySyncStorage
import Testing

/// The change feed wakes the sessions a node serves: a stream starts with the current state,
/// then tells of every commit and every admin change (it may merge them, never lose the last).
@Suite("Storage: change feed")
struct ChangeFeedTests {
    static let wait = 20.0

    @Test(arguments: Backend.all)
    func theFeedStartsWithTheStateThenTellsOfCommitsAndStateChanges(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            try await s.commit([Fixtures.noteKey("a"): StoredObject(object: Fixtures.note("a", "1"))], clientFile: file.ident)
            try await s.commit([Fixtures.noteKey("b"): StoredObject(object: Fixtures.note("b", "2"))], clientFile: file.ident)
            let state = try await s.syncState()
            let feed = await SignalRecorder.listening(to: s.changeFeed.signals())
            defer { Task { await feed.stop() } }

            let first = try await within(Self.wait, "the feed's first signal") { await feed.first { _ in true } }
            #expect(first == FeedSignal(headVersion: 2, stateRevision: state.revision))

            let head = try await s.commit([Fixtures.noteKey("c"): StoredObject(object: Fixtures.note("c", "3"))], clientFile: file.ident)
            let afterCommit = try await within(Self.wait, "a signal with head \(head)") { await feed.first { $0.headVersion >= head } }
            #expect(afterCommit.headVersion == 3)

            let terminated = try await s.setSyncEnabled(false)
            let afterTerminate = try await within(Self.wait, "a signal with revision \(terminated.revision)") {
                await feed.first { $0.stateRevision >= terminated.revision }
            }
            #expect(afterTerminate.stateRevision == terminated.revision)
            #expect(afterTerminate.headVersion == 3)

            try await s.bumpStateRevision()
            let bumped = try await s.syncState().revision
            _ = try await within(Self.wait, "a signal with revision \(bumped)") { await feed.first { $0.stateRevision >= bumped } }
            // Signals never go back.
            let seen = await feed.signals
            #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.headVersion <= $1.headVersion && $0.stateRevision <= $1.stateRevision })
        }
    }

    @Test(arguments: Backend.all)
    func everyStreamHearsEveryCommitAndEndsWhenTheStoreCloses(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            let one = await SignalRecorder.listening(to: s.changeFeed.signals())
            let two = await SignalRecorder.listening(to: s.changeFeed.signals())
            let initial = try await within(Self.wait, "the second stream's first signal") { await two.first { _ in true } }
            #expect(initial.headVersion == 0)
            let head = try await s.commit([Fixtures.noteKey("a"): StoredObject(object: Fixtures.note("a", "1"))], clientFile: file.ident)
            for (name, feed) in [("one", one), ("two", two)] {
                let signal = try await within(Self.wait, "stream \(name) hearing head \(head)") { await feed.first { $0.headVersion >= head } }
                #expect(signal.headVersion == head)
            }
            await store.close()
            for (name, feed) in [("one", one), ("two", two)] {
                try await within(Self.wait, "stream \(name) ending after close") { await feed.end() }
            }
        }
    }
}
