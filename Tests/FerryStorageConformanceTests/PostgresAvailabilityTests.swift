import Testing

/// Says, in every test report, whether the PostgreSQL backend was under test: without
/// `FERRY_TEST_POSTGRES_URL` this is skipped with the reason, and every other test of the suite
/// ran against SQLite alone (their PostgreSQL cases are left out, see `Backend.all`).
@Suite("Storage: backends under test")
struct PostgresAvailabilityTests {
    @Test(.enabled(if: PostgresTestDatabase.url != nil,
                   "FERRY_TEST_POSTGRES_URL is not set: the conformance tests ran against SQLite only (scripts/postgres-cluster.sh start DIR prints one)"))
    func postgreSQLIsUnderTest() async throws {
        #expect(Backend.all.map(\.testDescription) == ["SQLite", "PostgreSQL"])
        // The database answers and the backend opens on it.
        try await Backend(kind: .postgres).withStore { store in
            let state = try await store.storage.syncState()
            #expect(state.headVersion == 0)
        }
    }
}
