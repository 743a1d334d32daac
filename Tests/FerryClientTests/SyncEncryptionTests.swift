import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// Encrypted synced files (docs/encryption.md): uploads and downloads work through the page
/// cipher, and neither the synced file nor the App's user cache holds data or tokens in the
/// clear.
@Suite("Sync with encryption at rest")
struct SyncEncryptionTests {
    static let key = try! EncryptionKey((0..<64).map { UInt8(255 - $0) })
    static let marker = "synced-plaintext-marker-83ad"

    static func contents(_ path: String) -> Data { FileManager.default.contents(atPath: path) ?? Data() }

    @Test func encryptedFilesSyncBothWays() async throws {
        try await SyncTestServer.withServer { url in
            let writer = try await SessionTestApp(url: url, subject: "encrypted-sync") { $0.encryptionKey = Self.key }
            var options = SyncOpenOptions.mine(writer.user)
            options.encryptionKey = Self.key
            let w = try writer.open("w.ferry", options: options)
            for n in 0..<20 { try w.createItem(owner: writer.user.id, name: "\(Self.marker) \(n)") }
            try await w.waitUpload()
            w.close()

            let reader = try await SessionTestApp(url: url, subject: "encrypted-sync") { $0.encryptionKey = Self.key }
            var readerOptions = SyncOpenOptions.mine(reader.user)
            readerOptions.encryptionKey = Self.key
            let r = try reader.open("r.ferry", options: readerOptions)
            try await r.waitDownload()
            #expect(try r.itemNames().count == 20)
            r.close()

            for path in [writer.directory + "/w.ferry", reader.directory + "/r.ferry"] {
                for suffix in ["", "-wal"] {
                    #expect(Self.contents(path + suffix).range(of: Data(Self.marker.utf8)) == nil, "\(path + suffix) holds plaintext")
                }
            }
            // The user cache holds the user's id in the clear only when it is not encrypted.
            let cache = Self.contents(writer.directory + "/ferry-users.sqlite")
            #expect(cache.range(of: Data(writer.user.id.utf8)) == nil)
            #expect(!cache.isEmpty)

            // Without the key the synced file does not open.
            do {
                _ = try writer.open("w.ferry", options: SyncOpenOptions.mine(writer.user))
                Issue.record("an encrypted synced file opened without its key")
            } catch let e as FerryError {
                #expect(e.code == .decrypt, "\(e)")
            }
            writer.app.close()
            reader.app.close()
        }
    }
}

extension SyncOpenOptions {
    static func mine(_ user: SyncUser) -> SyncOpenOptions {
        let q = "ownerId == '\(user.id)'"
        return SyncOpenOptions(initialSubscriptions: { $0.add(name: "mine", objectType: "Item", query: q) })
    }
}
