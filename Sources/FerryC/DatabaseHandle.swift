import CFerry
import FerryClient
import FerryCore
import FerryStore

/// The object behind a `ferry_db_t *`: the database handle, its scheduler, and the names it
/// lends to C (valid for the handle's lifetime).
final class DatabaseHandle {
    let database: Database
    let polling: PollingScheduler?
    /// Lent to a host callback for the call only (client reset): Ferry closes it, not the host.
    let isLent: Bool
    let names = CValueStorage()
    let classNames: [UnsafePointer<CChar>]
    let propertyNames: [[UnsafePointer<CChar>]]
    let linkTargets: [[UnsafePointer<CChar>?]]

    init(database: Database, polling: PollingScheduler?, isLent: Bool = false) {
        self.database = database
        self.polling = polling
        self.isLent = isLent
        let storage = names
        classNames = database.schema.classes.map { storage.cString($0.name) }
        propertyNames = database.schema.classes.map { c in c.properties.map { storage.cString($0.name) } }
        linkTargets = database.schema.classes.map { c in c.properties.map { p in p.linkTarget.map { storage.cString($0) } } }
    }

    /// Frees the handle's resources: closes the database and lets go of the loop.
    func release() {
        database.close()
        database.scheduler.shutdown()
    }

    func objectSchema(_ cls: UInt32) throws -> ObjectSchema {
        guard Int(cls) < database.schema.classes.count else {
            throw FerryError(.noSuchClass, "no class with key \(cls) (the schema has \(database.schema.classes.count))")
        }
        return database.schema.classes[Int(cls)]
    }

    func checkOpen() throws {
        if database.isClosed { throw FerryError(.closed, "the database handle is closed") }
    }
}

func databaseHandle(_ db: OpaquePointer?) throws -> DatabaseHandle {
    try HandleTable.shared.lookup(db, .database, as: DatabaseHandle.self)
}

/// Lends `databases` to a host callback as `ferry_db_t *` handles valid for the call only.
func withLentDatabases<R>(_ databases: [Database], _ body: ([OpaquePointer]) -> R) -> R {
    let handles = databases.map { HandleTable.shared.register(DatabaseHandle(database: $0, polling: nil, isLent: true), kind: .database) }
    defer { for h in handles { _ = HandleTable.shared.remove(h, .database, as: DatabaseHandle.self) } }
    return body(handles)
}
