import Testing
import CSQLite
import FerryCore
import FerrySQLite
@testable import FerryStore
#if canImport(Glibc)
import Glibc
#endif

/// Tampering an attacker can do without the key (issue 22, point 4; docs/encryption.md, format
/// version 2): moving a WAL frame to another page, replaying a frame of an older WAL
/// generation, and copying a page from another file encrypted with the same key. Each must be
/// `.decrypt`, never accepted as genuine. The WAL tamperings also rewrite SQLite's frame
/// checksums, which any attacker can: they are unkeyed and linear, so a change of the header or
/// of the page can be carried through the cumulative chain without the plaintext.
@Suite("Encryption tampering")
struct EncryptionTamperingTests {
    typealias E = EncryptionTests

    // MARK: the WAL, as an attacker sees it

    struct WAL {
        var bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        func be32(_ o: Int) -> UInt32 { bytes[o..<(o + 4)].reduce(0) { $0 << 8 | UInt32($1) } }
        mutating func putBE32(_ o: Int, _ v: UInt32) { for i in 0..<4 { bytes[o + i] = UInt8(truncatingIfNeeded: v >> (24 - 8 * UInt32(i))) } }
        var pageSize: Int { Int(be32(8)) }
        var frameSize: Int { 24 + pageSize }
        var frameCount: Int { (bytes.count - 32) / frameSize }
        func frame(_ i: Int) -> Int { 32 + i * frameSize }
        /// The checksum reads 32-bit words in the byte order the magic number says.
        var bigEndianSums: Bool { bytes[3] & 1 == 1 }
        func word(_ o: Int) -> UInt32 {
            bigEndianSums ? be32(o) : bytes[o..<(o + 4)].reversed().reduce(0) { $0 << 8 | UInt32($1) }
        }
        func sums(ofFrame i: Int) -> (UInt32, UInt32) { (be32(frame(i) + 16), be32(frame(i) + 20)) }
        func sumsBefore(frame i: Int) -> (UInt32, UInt32) { i == 0 ? (be32(24), be32(28)) : sums(ofFrame: i - 1) }
        func isCommit(_ i: Int) -> Bool { be32(frame(i) + 4) != 0 }

        /// SQLite's WAL checksum run over `bytes` bytes whose 32-bit words are `words` followed
        /// by zeros, from `start`. It only adds, so it is linear in the start and the words.
        static func run(_ start: (UInt32, UInt32), words: [UInt32], bytes: Int) -> (UInt32, UInt32) {
            var (s1, s2) = start
            for step in 0..<(bytes / 8) {
                let x0 = 2 * step < words.count ? words[2 * step] : 0
                let x1 = 2 * step + 1 < words.count ? words[2 * step + 1] : 0
                s1 = s1 &+ x0 &+ s2
                s2 = s2 &+ x1 &+ s1
            }
            return (s1, s2)
        }

        /// Frame `i`'s checksum changed from `old` to `new`: carries the difference through
        /// every later frame (each frame's sums start from the previous frame's).
        mutating func propagate(from i: Int, old: (UInt32, UInt32), new: (UInt32, UInt32)) {
            var delta = (new.0 &- old.0, new.1 &- old.1)
            putBE32(frame(i) + 16, new.0)
            putBE32(frame(i) + 20, new.1)
            for j in (i + 1)..<frameCount where delta != (0, 0) {
                let d = Self.run(delta, words: [], bytes: 8 + pageSize)
                let (c1, c2) = sums(ofFrame: j)
                putBE32(frame(j) + 16, c1 &+ d.0)
                putBE32(frame(j) + 20, c2 &+ d.1)
                delta = d
            }
        }

        /// Gives frame `i` another page number, with checksums SQLite accepts.
        mutating func relabel(_ i: Int, to page: UInt32) {
            let before = word(frame(i))
            let old = sums(ofFrame: i)
            putBE32(frame(i), page)
            let d = Self.run((0, 0), words: [word(frame(i)) &- before], bytes: 8 + pageSize)
            propagate(from: i, old: old, new: (old.0 &+ d.0, old.1 &+ d.1))
        }

        /// Puts frame `i` of an older WAL in place of frame `i` (its page number, commit size
        /// and sealed page; this WAL's salts), with checksums SQLite accepts.
        mutating func replay(_ i: Int, from older: WAL) {
            let o = frame(i)
            let old = sums(ofFrame: i)
            // Its sums over its own header and page, from zero, then from this WAL's chain.
            let start = older.sumsBefore(frame: i), theirs = older.sums(ofFrame: i)
            let carried = Self.run(start, words: [], bytes: 8 + pageSize)
            let own = (theirs.0 &- carried.0, theirs.1 &- carried.1)
            let here = Self.run(sumsBefore(frame: i), words: [], bytes: 8 + pageSize)
            bytes.replaceSubrange(o..<(o + 8), with: older.bytes[o..<(o + 8)])
            bytes.replaceSubrange((o + 24)..<(o + frameSize), with: older.bytes[(o + 24)..<(o + frameSize)])
            propagate(from: i, old: old, new: (here.0 &+ own.0, here.1 &+ own.1))
        }
    }

    static func write(_ path: String, _ bytes: [UInt8]) {
        guard let f = fopen(path, "wb") else { Issue.record("cannot write \(path)"); return }
        _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, bytes.count, f) }
        fclose(f)
    }

    /// A copy of the open file and its WAL, as a crash would leave them.
    static func crashCopy(_ path: String, to copy: String) {
        write(copy, E.bytes(path))
        write(copy + "-wal", E.bytes(path + "-wal"))
    }

    /// Opens `path` and reads every object: the tampering must be refused as `.decrypt`.
    static func expectRefused(_ path: String, _ what: String) {
        do {
            let db = try E.open(path, key: E.key)
            defer { db.close() }
            let rows = try db.query(classIndex: 0, query: "complexity >= 0", arguments: [])
            for r in rows { _ = try db.object(classIndex: 0, key: r[0]) }
            Issue.record("\(what) was accepted (\(rows.count) objects read)")
        } catch let e as FerryError {
            #expect(e.code == .decrypt, "\(what): \(e)")
            #expect(e.message.contains("fails authentication"), "\(what): \(e)")
        } catch {
            Issue.record("\(what): unexpected error \(error)")
        }
    }

    /// The checksum arithmetic is SQLite's: it gives the WAL header's and frame 0's sums.
    static func checkArithmetic(_ wal: WAL) {
        let header = WAL.run((0, 0), words: (0..<6).map { wal.word(4 * $0) }, bytes: 24)
        #expect([header.0, header.1] == [wal.sumsBefore(frame: 0).0, wal.sumsBefore(frame: 0).1])
        let f = wal.frame(0)
        let words = [wal.word(f), wal.word(f + 4)] + (0..<(wal.pageSize / 4)).map { wal.word(f + 24 + 4 * $0) }
        let overSealed = WAL.run(wal.sumsBefore(frame: 0), words: words, bytes: 8 + wal.pageSize)
        #expect([overSealed.0, overSealed.1] != [wal.sums(ofFrame: 0).0, wal.sums(ofFrame: 0).1],
                "the sums are over the plaintext, not the sealed page")
    }

    /// Two transactions in the WAL: the first is followed by a later one, so a frame of it that
    /// fails authentication cannot be a torn write (synchronous=FULL synced the first before
    /// the second was written).
    static func twoCommits(_ db: Database) throws {
        try E.fill(db, count: 300)
        try E.fill(db, from: 300, count: 20)
    }

    @Test func walFrameRelabelledToAnotherPageIsRefused() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/enc.ferry", copy = dir + "/relabelled.ferry"
        let db = try E.open(path, key: E.key)
        try Self.twoCommits(db)
        Self.crashCopy(path, to: copy)
        db.close()
        var wal = WAL(E.bytes(copy + "-wal"))
        Self.checkArithmetic(wal)
        // Frame 0 belongs to a transaction that later ones follow.
        #expect((0..<wal.frameCount).filter { wal.isCommit($0) }.count >= 2)
        let own = wal.be32(wal.frame(0))
        let other = (1..<wal.frameCount).map { wal.be32(wal.frame($0)) }.first { $0 != own } ?? 0
        #expect(other != 0)
        wal.relabel(0, to: other)
        Self.write(copy + "-wal", wal.bytes)
        Self.expectRefused(copy, "a WAL frame relabelled to another page")
    }

    /// What a crash can leave is not tampering: only the WAL's last transaction can be torn
    /// (synchronous=FULL), and a frame of it that fails authentication ends the log there, as
    /// SQLite's checksum would; the file opens with the transactions before it.
    @Test func aTornLastTransactionIsDroppedNotRefused() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/enc.ferry", copy = dir + "/torn.ferry"
        let db = try E.open(path, key: E.key)
        try Self.twoCommits(db)
        Self.crashCopy(path, to: copy)
        db.close()
        var wal = WAL(E.bytes(copy + "-wal"))
        let commits = (0..<wal.frameCount).filter { wal.isCommit($0) }
        #expect(commits.count >= 2 && commits.last == wal.frameCount - 1)
        let first = commits[commits.count - 2] + 1 // the last transaction's first frame
        wal.bytes[wal.frame(first) + 24 + 100] ^= 1
        Self.write(copy + "-wal", wal.bytes)
        let torn = try E.open(copy, key: E.key)
        defer { torn.close() }
        #expect(try torn.query(classIndex: 0, query: "complexity >= 0", arguments: []).count == 300)
        #expect(try torn.object(classIndex: 0, key: Fixtures.oid(299)) != nil)
        #expect(try torn.object(classIndex: 0, key: Fixtures.oid(300)) == nil)
    }

    @Test func walFrameReplayedFromAnOlderGenerationIsRefused() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/enc.ferry", copy = dir + "/replayed.ferry"
        var db = try E.open(path, key: E.key)
        try Self.twoCommits(db)
        let older = WAL(E.bytes(path + "-wal"))
        db.close() // checkpoints and removes the WAL: the next one has new salts
        db = try E.open(path, key: E.key)
        try E.fill(db, from: 1000, count: 300)
        try E.fill(db, from: 1300, count: 20)
        Self.crashCopy(path, to: copy)
        db.close()
        var wal = WAL(E.bytes(copy + "-wal"))
        Self.checkArithmetic(wal)
        #expect(wal.be32(16) != older.be32(16) || wal.be32(20) != older.be32(20))
        #expect((0..<wal.frameCount).filter { wal.isCommit($0) }.count >= 2)
        wal.replay(0, from: older)
        Self.write(copy + "-wal", wal.bytes)
        Self.expectRefused(copy, "a WAL frame of an older generation")
    }

    @Test func pageCopiedFromAnotherFileWithTheSameKeyIsRefused() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/enc.ferry", other = dir + "/copy.ferry"
        let db = try E.open(path, key: E.key)
        try E.fill(db, count: 300)
        try db.writeCopy(toPath: other) // a copy, as a client reset's snapshot is
        db.close()
        let second = try E.open(other, key: E.key, schema: nil)
        try E.fill(second, from: 300, count: 300)
        second.close()
        var target = E.bytes(path)
        let source = E.bytes(other)
        let page = 4096
        #expect(target.count > 6 * page && source.count > 6 * page)
        // Every page but the first of the other file, each at its own offset in this one (so
        // whichever page a read needs is one of them).
        let end = min(target.count, source.count) / page * page
        target.replaceSubrange(page..<end, with: source[page..<end])
        Self.write(path, target)
        Self.expectRefused(path, "a page copied from another file with the same key")
    }

    /// Temporary files (a temporary table, a sort or statement journal that spills) would hold
    /// pages in the clear: the cipher's VFS refuses to open them, so a connection that did not
    /// keep its temporary data in memory fails instead of writing plaintext.
    @Test func temporaryFilesAreRefused() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let cipher = try PageCipher(key: E.key)
        defer { cipher.destroy() }
        let c = try SQLiteConnection(path: cipher.uri(dir + "/temp.ferry"), flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                     description: "temp")
        defer { c.close() }
        var reserve: Int32 = 28
        if let db = c.db { _ = sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve) }
        try c.exec("CREATE TABLE t(x)")
        try c.exec("PRAGMA temp_store=FILE")
        #expect(throws: (any Error).self) {
            // A small page cache makes the temporary table spill to its file.
            try c.exec("""
                CREATE TEMP TABLE secret(x); PRAGMA temp.cache_size=2;
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
                INSERT INTO secret SELECT '\(E.marker)-' || i FROM n
                """)
        }
    }
}
