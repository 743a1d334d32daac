import FerryServer
import Foundation
import Testing

/// Issue 22, point 8: the server's data directory holds every user's data, the user directory
/// (password hashes, refresh tokens) and the shared secrets: a new one is made for the owner
/// alone (0700), and the stores in it are 0600, whatever the process's umask.
@Suite("Server: data directory permissions")
struct ServerFilePermissionsTests {
    static func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? -1) & 0o777
    }

    @Test func aNewDataDirectoryAndItsStoresAreTheOwnersAlone() async throws {
        let parent = NSTemporaryDirectory() + "ferry-perms-\(UInt64.random(in: 0...UInt64.max))"
        let dataDirectory = parent + "/data"
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let old = umask(0o022)
        defer { umask(old) }
        try await LiveServer.withServer(configure: { $0.dataDirectory = dataDirectory }) { port in
            // A login writes the user directory; an upload writes the sync store.
            _ = try await LiveServer.anonymousUser(port: port)
            #expect(try Self.mode(dataDirectory) == 0o700)
            let files = try FileManager.default.contentsOfDirectory(atPath: dataDirectory).filter { !$0.hasPrefix(".") }
            #expect(!files.isEmpty)
            for name in files {
                let path = dataDirectory + "/" + name
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
                let mode = try Self.mode(path)
                #expect(mode & 0o077 == 0, "\(name) is \(String(mode, radix: 8))")
            }
        }
    }
}
