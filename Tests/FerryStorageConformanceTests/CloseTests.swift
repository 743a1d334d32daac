import FerryCore
import FerrySyncStorage
import Testing

/// A closed store refuses work with an error (a node shutting down while a session still
/// calls it must not crash or hang).
@Suite("Storage: close")
struct CloseTests {
    @Test(arguments: Backend.all)
    func callsAfterCloseFail(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            await store.close()
            await #expect(throws: (any Error).self) { try await s.syncState() }
            await #expect(throws: (any Error).self) { try await s.clientFile(file.ident) }
            await #expect(throws: (any Error).self) { try await s.commit([Fixtures.noteKey("a"): StoredObject(object: Fixtures.note("a", "x"))], clientFile: file.ident) }
            // A snapshot opens a connection of its own (SQLite: by path): refused all the same.
            await #expect(throws: (any Error).self) { try await s.withSnapshot { $0.version } }
        }
    }
}
