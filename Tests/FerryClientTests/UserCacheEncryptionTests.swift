import Testing
import FerryCore
@testable import FerryClient
import FerryStore
#if canImport(Glibc)
import Glibc
#endif

/// The user cache in the base directory (ids and tokens) encrypted with the App's key
/// (docs/encryption.md): no token in the clear, a wrong or missing key refused, an existing
/// unencrypted cache encrypted in place with its users kept.
@Suite("User cache encryption")
struct UserCacheEncryptionTests {
    static let key = try! EncryptionKey([UInt8](repeating: 7, count: 64))
    static let token = "refresh-token-in-the-clear-4e2b"

    static func directory() -> String {
        var template = Array("/tmp/ferry-usercache-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    static func fileContains(_ path: String, _ needle: String) -> Bool {
        guard let f = fopen(path, "rb") else { return false }
        defer { fclose(f) }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n == 0 { break }
            data += chunk[0..<n]
        }
        let n = Array(needle.utf8)
        guard data.count >= n.count else { return false }
        return (0...(data.count - n.count)).contains { data[$0] == n[0] && Array(data[$0..<($0 + n.count)]) == n }
    }

    static func record(_ id: String) -> UserStore.Record {
        UserStore.Record(id: id, accessToken: "access", refreshToken: token, provider: "local-userpass", loggedIn: true)
    }

    @Test func encryptedCacheHoldsNoTokenAndNeedsItsKey() throws {
        let dir = Self.directory()
        defer { _ = system("rm -rf '\(dir)'") }
        let store = try UserStore(directory: dir, key: Self.key)
        try store.save(Self.record("u1"), bump: true)
        store.close()
        let file = dir + "/ferry-users.sqlite"
        #expect(!Self.fileContains(file, Self.token))
        #expect(!Self.fileContains(file + "-wal", Self.token))
        let again = try UserStore(directory: dir, key: Self.key)
        #expect(try again.all().map(\.refreshToken) == [Self.token])
        again.close()
        do {
            _ = try UserStore(directory: dir, key: try EncryptionKey([UInt8](repeating: 8, count: 64)))
            Issue.record("a wrong key opened the user cache")
        } catch let e as FerryError {
            #expect(e.code == .decrypt, "\(e)")
        }
        do {
            _ = try UserStore(directory: dir)
            Issue.record("the encrypted user cache opened without a key")
        } catch let e as FerryError {
            #expect(e.code == .decrypt, "\(e)")
        }
    }

    @Test func unencryptedCacheIsEncryptedInPlace() throws {
        let dir = Self.directory()
        defer { _ = system("rm -rf '\(dir)'") }
        let plain = try UserStore(directory: dir)
        try plain.save(Self.record("u1"), bump: true)
        plain.close()
        #expect(Self.fileContains(dir + "/ferry-users.sqlite", Self.token))
        let store = try UserStore(directory: dir, key: Self.key)
        #expect(try store.all().map(\.id) == ["u1"])
        store.close()
        #expect(!Self.fileContains(dir + "/ferry-users.sqlite", Self.token))
    }
}
