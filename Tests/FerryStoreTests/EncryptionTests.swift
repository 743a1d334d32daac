import Testing
import FerryCore
import FerrySQLite
@testable import FerryStore
#if canImport(Glibc)
import Glibc
#endif

/// Encryption at rest (docs/encryption.md): the file and its WAL hold no plaintext, a wrong or
/// missing key and a changed page are `.decrypt` errors, and files convert both ways.
@Suite("Encryption at rest")
struct EncryptionTests {
    static let key = try! EncryptionKey([UInt8](repeating: 0x42, count: 64))
    static let otherKey = try! EncryptionKey((0..<64).map { UInt8($0) })
    static let marker = "plaintext-marker-7f3a"

    static func open(_ path: String, key: EncryptionKey?, schema: Schema? = Fixtures.itemSchema()) throws -> Database {
        try Database.open(DatabaseConfiguration(location: .file(path), schema: schema, encryptionKey: key), scheduler: try PollingScheduler())
    }

    /// Writes `count` items whose names carry the marker, in one transaction.
    static func fill(_ db: Database, from start: UInt32 = 0, count: UInt32) throws {
        try db.beginWrite()
        for n in start..<(start + count) {
            try db.create(classIndex: 0, values: [(0, Fixtures.oid(n)), (1, .string("alice")),
                                                  (2, .string("\(marker)-\(n)")), (3, .int(Int64(n)))])
        }
        try db.commit()
    }

    static func bytes(_ path: String) -> [UInt8] {
        guard let f = fopen(path, "rb") else { return [] }
        defer { fclose(f) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n == 0 { break }
            out += chunk[0..<n]
        }
        return out
    }

    static func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let n = Array(needle.utf8)
        guard haystack.count >= n.count else { return false }
        for i in 0...(haystack.count - n.count) where haystack[i] == n[0] && Array(haystack[i..<(i + n.count)]) == n {
            return true
        }
        return false
    }

    static func expectDecrypt(_ body: () throws -> Void, _ words: String) {
        do {
            try body()
            Issue.record("expected a decrypt error")
        } catch let e as FerryError {
            #expect(e.code == .decrypt, "\(e)")
            #expect(e.message.contains(words), "\(e)")
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test func fileAndWALHoldNoPlaintext() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/enc.ferry"
        let db = try Self.open(path, key: Self.key)
        try Self.fill(db, count: 500)
        // The commit is in the WAL now (the checkpoint threshold is far away).
        let wal = Self.bytes(path + "-wal")
        #expect(wal.count > 4096)
        #expect(!Self.contains(wal, Self.marker))
        #expect(!Self.contains(Self.bytes(path), Self.marker))
        // A copy of the file and its WAL taken while open is what a crash leaves: it recovers.
        _ = system("cp '\(path)' '\(dir)/crash.ferry' && cp '\(path)-wal' '\(dir)/crash.ferry-wal'")
        db.close()
        let file = Self.bytes(path)
        #expect(file.count >= 4096)
        #expect(!Self.contains(file, Self.marker))
        #expect(!Self.contains(file, "SQLite format 3"))
        #expect(file[20] == 28) // the reserved bytes: nonce and tag
        let again = try Self.open(path, key: Self.key)
        defer { again.close() }
        #expect(try again.object(classIndex: 0, key: Fixtures.oid(499))?[2] == .string("\(Self.marker)-499"))
        #expect(try again.query(classIndex: 0, query: "complexity >= 0", arguments: []).count == 500)
        let crashed = try Self.open(dir + "/crash.ferry", key: Self.key)
        defer { crashed.close() }
        #expect(try crashed.query(classIndex: 0, query: "complexity >= 0", arguments: []).count == 500)
    }

    @Test func wrongMissingOrUnneededKeyIsDecryptError() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/enc.ferry"
        try Self.open(path, key: Self.key).close()
        Self.expectDecrypt({ _ = try Self.open(path, key: Self.otherKey) }, "key does not decrypt")
        Self.expectDecrypt({ _ = try Self.open(path, key: nil) }, "is encrypted")
        let plain = dir + "/plain.ferry"
        try Self.open(plain, key: nil).close()
        Self.expectDecrypt({ _ = try Self.open(plain, key: Self.key) }, "not encrypted")
        // The failed opens left the files as they were.
        let db = try Self.open(path, key: Self.key)
        defer { db.close() }
        // A second handle in this process must give the same key.
        Self.expectDecrypt({ _ = try Self.open(path, key: Self.otherKey) }, "another key")
        Self.expectDecrypt({ _ = try Self.open(path, key: nil) }, "is encrypted")
        let second = try Self.open(path, key: Self.key)
        second.close()
    }

    @Test func changedPageIsAnErrorNotACrash() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        for target in ["page 1", "data page"] {
            let path = dir + "/\(target == "page 1" ? "first" : "data").ferry"
            let db = try Self.open(path, key: Self.key)
            try Self.fill(db, count: 300)
            db.close()
            let size = Self.bytes(path).count
            #expect(size > 8 * 4096)
            // One bit flipped: in page 1's encrypted part, or in every other page.
            let offsets = target == "page 1" ? [60] : stride(from: 4096 + 200, to: size, by: 4096).map { $0 }
            guard let f = fopen(path, "r+b") else { Issue.record("cannot open \(path)"); continue }
            for o in offsets {
                fseek(f, o, SEEK_SET)
                let b = fgetc(f)
                fseek(f, o, SEEK_SET)
                fputc(b ^ 1, f)
            }
            fclose(f)
            do {
                let reopened = try Self.open(path, key: Self.key)
                defer { reopened.close() }
                _ = try reopened.query(classIndex: 0, query: "complexity >= 0", arguments: [])
                Issue.record("a changed \(target) was read without error")
            } catch let e as FerryError {
                #expect(e.code == .decrypt, "\(target): \(e)")
            }
        }
    }

    /// Files that are not what they claim: a garbage header, a valid-looking encrypted header
    /// over garbage pages, a truncated file. Each is an error, never a crash.
    @Test func hostileFilesAreErrors() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        var rng = SystemRandomNumberGenerator()
        func write(_ name: String, _ bytes: [UInt8]) -> String {
            let path = dir + "/" + name
            let f = fopen(path, "wb")!
            _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, bytes.count, f) }
            fclose(f)
            return path
        }
        var garbage = (0..<(3 * 4096)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let paths = [write("garbage.ferry", garbage)]
        // Bytes 16..23 of an encrypted page 1 (4096-byte pages, 28 reserved bytes), then noise.
        garbage.replaceSubrange(16..<24, with: [16, 0, 1, 1, 28, 64, 32, 32])
        let lookalike = write("lookalike.ferry", garbage)
        let truncated = write("truncated.ferry", Array(garbage[0..<1000]))
        let odd = write("odd-size.ferry", Array(garbage[0..<(4096 + 17)]))
        for path in paths + [lookalike, truncated, odd] {
            do {
                let db = try Self.open(path, key: Self.key)
                _ = try db.query(classIndex: 0, query: "complexity >= 0", arguments: [])
                db.close()
                Issue.record("\(path) opened")
            } catch let e as FerryError {
                #expect([.decrypt, .corrupt].contains(e.code), "\(path): \(e)")
            }
        }
        // Converting one is refused the same way, and leaves no temporary file.
        #expect(throws: FerryError.self) { try Database.changeKey(path: lookalike, oldKey: Self.key, newKey: nil) }
        #expect(access(lookalike + ".ferry-rekey", F_OK) != 0)
    }

    @Test func filesConvertBothWays() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/convert.ferry"
        let plain = try Self.open(path, key: nil)
        try Self.fill(plain, count: 200)
        plain.close()
        #expect(Self.contains(Self.bytes(path), Self.marker))

        try Database.changeKey(path: path, oldKey: nil, newKey: Self.key)
        #expect(!Self.contains(Self.bytes(path), Self.marker))
        Self.expectDecrypt({ _ = try Self.open(path, key: nil) }, "is encrypted")
        var db = try Self.open(path, key: Self.key, schema: nil)
        #expect(try db.query(classIndex: 0, query: "complexity >= 0", arguments: []).count == 200)
        try Self.fill(db, from: 200, count: 10)
        db.close()

        // A wrong old key is refused and leaves the file alone.
        Self.expectDecrypt({ try Database.changeKey(path: path, oldKey: Self.otherKey, newKey: nil) }, "key does not decrypt")
        try Database.changeKey(path: path, oldKey: Self.key, newKey: Self.otherKey)
        Self.expectDecrypt({ _ = try Self.open(path, key: Self.key) }, "key does not decrypt")
        try Database.changeKey(path: path, oldKey: Self.otherKey, newKey: nil)
        #expect(Self.contains(Self.bytes(path), Self.marker))
        db = try Self.open(path, key: nil, schema: nil)
        defer { db.close() }
        #expect(try db.query(classIndex: 0, query: "complexity >= 0", arguments: []).count == 210)
        #expect(access(path + ".ferry-rekey", F_OK) != 0)
        // Not while it is open.
        #expect(throws: FerryError.self) { try Database.changeKey(path: path, oldKey: nil, newKey: Self.key) }
    }

    @Test func copiesOfAnEncryptedFileAreEncrypted() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let db = try Self.open(dir + "/enc.ferry", key: Self.key)
        defer { db.close() }
        try Self.fill(db, count: 50)
        try db.writeCopy(toPath: dir + "/copy.ferry")
        #expect(!Self.contains(Self.bytes(dir + "/copy.ferry"), Self.marker))
        Self.expectDecrypt({ _ = try Self.open(dir + "/copy.ferry", key: nil) }, "is encrypted")
        let copy = try Self.open(dir + "/copy.ferry", key: Self.key, schema: nil)
        defer { copy.close() }
        #expect(try copy.query(classIndex: 0, query: "complexity >= 0", arguments: []).count == 50)
    }

    @Test func keysAreSixtyFourBytesAndFilesOnly() throws {
        #expect(throws: FerryError.self) { _ = try EncryptionKey([UInt8](repeating: 1, count: 32)) }
        do {
            _ = try Database.open(DatabaseConfiguration(location: .memory("enc-\(UInt32.random(in: 0...UInt32.max))"), schema: Fixtures.itemSchema(),
                                                        encryptionKey: Self.key), scheduler: try PollingScheduler())
            Issue.record("an in-memory database took a key")
        } catch let e as FerryError {
            #expect(e.code == .invalidArgument)
        }
    }
}
