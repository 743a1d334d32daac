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

extension SyncEncryptionTests {
    /// A client reset of an encrypted file: the callbacks' snapshot opens (it is a copy of the
    /// file, encrypted with its key), a copy of it is encrypted too, and the reset file syncs on.
    @Test func aResetOfAnEncryptedFileSeesItsSnapshotAndCopiesStayEncrypted() async throws {
        try await SyncTestServer.withServer(secrets: AdminAPI.secrets) { url in
            let seen = EventLog<String>()
            let copy = SyncTestServer.temporaryDirectory("encrypted-before-copy") + "/copy.ferry"
            var options = SyncOpenOptions(clientResetMode: .recoverUnsyncedChanges, beforeReset: { before in
                let n = (try? before.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).count) ?? -1
                seen.add("before: \(n) items")
                seen.add((try? before.writeCopy(toPath: copy)) != nil ? "copied" : "copy failed")
            }, afterReset: { _, after, report in
                let a = (try? after.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).count) ?? -1
                seen.add("after: \(a) items, recovered \(report.recovered)")
            })
            options.encryptionKey = Self.key
            let a = try await SessionTestApp(url: url, subject: "encrypted-reset") { $0.reconnectDelayMinMs = 50; $0.reconnectDelayMaxMs = 200 }
            defer { a.app.close() }
            let s = try a.open("a.ferry", options: options)
            defer { s.close() }
            try await s.subscribe("ownerId == '\(a.user.id)'")
            try s.createItem(owner: a.user.id, name: "\(Self.marker) synced")
            try await s.waitUpload()
            s.suspend()
            try s.createItem(owner: a.user.id, name: "\(Self.marker) unsynced")
            try await AdminAPI.post(url, "sync/terminate")
            try await AdminAPI.post(url, "sync/enable")
            s.resume()
            #expect(await seen.wait(seconds: 30) { $0.count >= 3 })
            #expect(seen.all == ["before: 2 items", "copied", "after: 2 items, recovered true"])
            #expect(Self.contents(copy).range(of: Data(Self.marker.utf8)) == nil)
            let opened = try Database.open(DatabaseConfiguration(location: .file(copy), schema: nil, encryptionKey: Self.key),
                                           scheduler: PollingScheduler())
            #expect(try opened.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).count == 2)
            opened.close()
        }
    }
}

extension SyncOpenOptions {
    static func mine(_ user: SyncUser) -> SyncOpenOptions {
        let q = "ownerId == '\(user.id)'"
        return SyncOpenOptions(initialSubscriptions: { $0.add(name: "mine", objectType: "Item", query: q) })
    }
}
