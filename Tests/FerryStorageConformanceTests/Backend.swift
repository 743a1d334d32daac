import Testing

/// A storage backend the conformance tests run against. Every test takes one as its argument
/// (`@Test(arguments: Backend.all)`), so each behaviour is checked on every backend by the
/// same code. Each test gets a fresh, empty place.
///
/// PostgreSQL needs `FERRY_TEST_POSTGRES_URL` (a database the tests may empty; see
/// scripts/postgres-cluster.sh). Without it, `all` is SQLite alone and
/// `PostgresAvailabilityTests` is reported as skipped with the reason: Swift Testing 6.3's
/// console shows a cancelled test case as passed, so leaving the PostgreSQL cases in and
/// cancelling them would look like a pass. CI sets the variable and checks separately that it did.
struct Backend: Sendable, CustomTestStringConvertible {
    enum Kind: Sendable { case sqlite, postgres }
    let kind: Kind

    static let all = [Backend(kind: .sqlite)] + (PostgresTestDatabase.url == nil ? [] : [Backend(kind: .postgres)])

    var testDescription: String {
        switch kind {
        case .sqlite: "SQLite"
        case .postgres: "PostgreSQL"
        }
    }

    /// Runs `body` with a fresh empty place of this backend, removed (or emptied) afterwards.
    func withPlace<T: Sendable>(_ body: (any StorePlace) async throws -> T) async throws -> T {
        switch kind {
        case .sqlite:
            let place = try SQLitePlace.make()
            defer { place.remove() }
            return try await body(place)
        case .postgres:
            guard let url = PostgresTestDatabase.url else { throw PostgresNotConfigured() }
            return try await PostgresTestDatabase.withEmptyDatabase(url: url, body)
        }
    }

    /// Runs `body` on a store opened on a fresh empty place, and closes it afterwards.
    /// (A closure whose only `try`s are inside `#expect` is inferred not to throw and does not
    /// compile: give it one `try` outside, or write `{ store throws in`.)
    func withStore<T: Sendable>(_ body: (OpenStore) async throws -> T) async throws -> T {
        try await withPlace { try await $0.withOpen(body) }
    }
}

struct PostgresNotConfigured: Error, CustomStringConvertible {
    var description: String { "FERRY_TEST_POSTGRES_URL is not set" }
}
