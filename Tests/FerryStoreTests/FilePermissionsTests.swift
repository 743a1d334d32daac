import FerryCore
import FerryStore
import Foundation
import Testing

/// Issue 22, point 8: the files Ferry creates hold users' data and tokens: only their owner
/// may read them, whatever the process's umask (SQLite alone made them 0644).
@Suite("Store: file permissions")
struct FilePermissionsTests {
    static func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? Int ?? -1) & 0o777
    }

    @Test func aNewDatabaseAndItsWALAreReadableOnlyByTheirOwner() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let old = umask(0o022)
        defer { umask(old) }
        let path = dir + "/private ü.ferry"  // a name the store percent-encodes in its URI
        let db = try Database.open(DatabaseConfiguration(location: .file(path), schema: Fixtures.itemSchema()), scheduler: PollingScheduler())
        defer { db.close() }
        try db.beginWrite()
        try Fixtures.createItem(db, 1)
        try db.commit()
        #expect(try Self.mode(path) == 0o600)
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            #expect(try Self.mode(path + suffix) == 0o600, "\(suffix)")
        }
    }
}
