import Testing
@testable import FerryStore
#if canImport(Glibc)
import Glibc
#endif

/// The /dev/shm files behind in-memory databases (issue 11, point 13): the sweep of stale files
/// crashed the host with a few hundred of them.
@Suite("In-memory database files")
struct MemoryFilesTests {
    /// readdir's records are `d_reclen` bytes, not `sizeof(struct dirent)`: the last one of
    /// glibc's buffer can end just before an unmapped page. A record laid out that way here,
    /// the name is read without touching the page after it (reading the whole `d_name`
    /// array crashed).
    @Test func aDirectoryEntryNameIsReadWithinItsRecord() throws {
        let page = Int(getpagesize())
        let mapping = try #require(mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        try #require(mapping != MAP_FAILED)
        defer { munmap(mapping, 2 * page) }
        try #require(mprotect(mapping + page, page, PROT_NONE) == 0)
        let nameOffset = try #require(MemoryLayout<dirent>.offset(of: \dirent.d_name))
        let lengthOffset = try #require(MemoryLayout<dirent>.offset(of: \dirent.d_reclen))
        let name = "ferry-1000-4242-17-123456789.db-wal"
        let recordLength = (nameOffset + name.utf8.count + 1 + 7) / 8 * 8 // glibc pads records to 8 bytes
        let record = mapping + page - recordLength
        memset(record, 0, recordLength)
        record.storeBytes(of: UInt16(recordLength), toByteOffset: lengthOffset, as: UInt16.self)
        for (i, byte) in name.utf8.enumerated() { record.storeBytes(of: byte, toByteOffset: nameOffset + i, as: UInt8.self) }
        let entry = record.bindMemory(to: dirent.self, capacity: 1)
        #expect(MemoryFiles.name(of: entry) == name)
    }
}
