import Testing
import Foundation
import CFerryCipher
import CSQLite
import FerryCore
import FerrySQLite
@testable import FerryStore
#if canImport(Glibc)
import Glibc
#endif

/// Encryption format versions (docs/encryption.md): new files are version 2, with a salt and a
/// page key of their own; a version 1 file (Tests/Fixtures/encryption-v1) still opens, reads and
/// writes, and ferry_db_change_key rewrites it in version 2.
@Suite("Encryption format versions")
struct EncryptionFormatTests {
    typealias E = EncryptionTests
    typealias T = EncryptionTamperingTests

    /// Written by the version 1 VFS (the commit before format version 2) with `E.key`: 30
    /// items checkpointed into the file, then 10 more committed to the WAL, copied while open
    /// (`v1.ferry-wal`), as a crash leaves them. Tests/Fixtures/encryption-v1/README.md.
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/encryption-v1/v1.ferry").path

    static func count(_ db: Database) throws -> Int {
        try db.query(classIndex: 0, query: "complexity >= 0", arguments: []).count
    }

    @Test func newFilesAreVersion2WithSaltsOfTheirOwn() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        var salts: [[UInt8]] = []
        for name in ["a", "b"] {
            let db = try E.open(dir + "/\(name).ferry", key: E.key)
            try E.fill(db, count: 20)
            db.close()
            let bytes = E.bytes(dir + "/\(name).ferry")
            #expect(PageCipher.formatVersion(dir + "/\(name).ferry") == Int(FCIPHER_FORMAT_V2))
            #expect(Array(bytes[0..<4]) == [0x46, 0x52, 0x59, 2]) // "FRY", 2
            salts.append(Array(bytes[4..<16]))
        }
        #expect(salts[0] != salts[1])
    }

    @Test func aVersion1FileOpensAndMigrates() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/v1.ferry"
        T.write(path, E.bytes(Self.fixture))
        T.write(path + "-wal", E.bytes(Self.fixture + "-wal"))
        #expect(E.bytes(path).count >= 4096 && E.bytes(path + "-wal").count > 4096)
        #expect(PageCipher.formatVersion(path) == Int(FCIPHER_FORMAT_V1))

        // It opens (its WAL recovered), reads, and takes writes, still in version 1.
        var db = try E.open(path, key: E.key, schema: nil)
        #expect(try Self.count(db) == 40)
        #expect(try db.object(classIndex: 0, key: Fixtures.oid(39))?[2] == .string("\(E.marker)-39"))
        try E.fill(db, from: 40, count: 10)
        db.close()
        #expect(PageCipher.formatVersion(path) == Int(FCIPHER_FORMAT_V1))
        E.expectDecrypt({ _ = try E.open(path, key: E.otherKey, schema: nil) }, "key does not decrypt")
        db = try E.open(path, key: E.key, schema: nil)
        #expect(try Self.count(db) == 50)
        db.close()

        // Changing the key to itself rewrites it in version 2.
        try Database.changeKey(path: path, oldKey: E.key, newKey: E.key)
        #expect(PageCipher.formatVersion(path) == Int(FCIPHER_FORMAT_V2))
        #expect(!E.contains(E.bytes(path), E.marker))
        db = try E.open(path, key: E.key, schema: nil)
        #expect(try Self.count(db) == 50)
        #expect(try db.object(classIndex: 0, key: Fixtures.oid(45))?[2] == .string("\(E.marker)-45"))
        try E.fill(db, from: 50, count: 10)
        db.close()
        db = try E.open(path, key: E.key, schema: nil)
        defer { db.close() }
        #expect(try Self.count(db) == 60)
        #expect(PageCipher.formatVersion(path) == Int(FCIPHER_FORMAT_V2))
    }

    /// A transaction bigger than the page cache spills pages to the WAL, rewrites some of them
    /// in place, and SQLite then writes its later frame headers with zero salts until the
    /// commit fills them in: the frames are bound to the WAL header's salts, so they still read
    /// back. (With the frame header's salts bound instead, this read failed.)
    @Test func aTransactionThatSpillsAndRewritesItsFramesReadsBack() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let cipher = try PageCipher(key: E.key)
        defer { cipher.destroy() }
        let path = cipher.uri(dir + "/spill.db")
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        func check(_ c: SQLiteConnection) throws {
            let integrity = try c.statement("PRAGMA integrity_check")
            defer { integrity.reset() }
            #expect(try integrity.step() && integrity.string(0) == "ok")
            let count = try c.statement("SELECT count(*) FROM t")
            defer { count.reset() }
            #expect(try count.step() && count.int64(0) == 3000)
        }
        let c = try cipher.connection(path, flags: flags, description: "spill")
        try c.exec("PRAGMA journal_mode=WAL; PRAGMA cache_size=10; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)")
        try c.exec("""
            BEGIN;
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
            INSERT INTO t SELECT i, hex(randomblob(100)) FROM n;
            UPDATE t SET v = hex(randomblob(100));
            COMMIT
            """)
        try check(c)
        let other = try cipher.connection(path, flags: flags, description: "spill")
        try check(other)
        other.close()
        c.close()
    }

    /// A user cache (any SQLite file opened with EncryptedConnection) of format version 1 is
    /// rewritten in version 2 when opened. The fixture: one table `t` holding one row,
    /// written by the version 1 VFS with `E.key` (Tests/Fixtures/encryption-v1/make-cache-v1.c).
    @Test func aVersion1UserCacheIsRewrittenInVersion2WhenOpened() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/ferry-users.sqlite"
        T.write(path, E.bytes((Self.fixture as NSString).deletingLastPathComponent + "/cache-v1.sqlite"))
        #expect(PageCipher.formatVersion(path) == Int(FCIPHER_FORMAT_V1))
        let c = try EncryptedConnection(path: path, key: E.key, description: "the user cache")
        defer { c.close() }
        #expect(PageCipher.formatVersion(path) == Int(FCIPHER_FORMAT_V2))
        let row = try c.connection.statement("SELECT x FROM t")
        defer { row.reset() }
        #expect(try row.step() && row.string(0) == "plaintext-marker-7f3a-cache")
    }
}
