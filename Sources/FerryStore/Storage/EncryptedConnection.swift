import CFerryCipher
import CSQLite
import FerryCore
import FerrySQLite

/// An SQLite connection of its own to a small file encrypted like a database
/// (docs/encryption.md), outside any store: the sync client's user cache. An unencrypted file
/// at the path is encrypted in place first (it holds nothing that another key could open), and
/// a file of encryption format version 1 is rewritten in version 2.
public final class EncryptedConnection {
    public let connection: SQLiteConnection
    private let cipher: PageCipher

    public init(path: String, key: EncryptionKey, description: String) throws {
        switch PageCipher.probe(path) {
        case .plain:
            try Database.convert(path: path, oldKey: nil, newKey: key, requireFerryFile: false, description: description)
        case .encrypted where PageCipher.formatVersion(path) == Int(FCIPHER_FORMAT_V1):
            // Best effort: a cache another process has open stays in version 1 until later
            // (and a wrong key fails below, as it would anyway).
            try? Database.convert(path: path, oldKey: key, newKey: key, requireFerryFile: false, description: description)
        default:
            break
        }
        let cipher = try PageCipher(key: key)
        let connection: SQLiteConnection
        do {
            connection = try cipher.connection(cipher.uri(path), flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, description: description)
        } catch {
            cipher.destroy()
            throw error
        }
        do {
            // The first read: a wrong key fails here, not at a later write.
            try connection.exec("SELECT count(*) FROM sqlite_master")
        } catch {
            connection.close()
            cipher.destroy()
            throw error
        }
        self.cipher = cipher
        self.connection = connection
    }

    /// Refuses a file that is encrypted when no key was given (SQLite would only say it is not
    /// a database).
    public static func checkUnencrypted(path: String, description: String) throws {
        try PageCipher.checkKey(path: path, hasKey: false, description: description)
    }

    /// Closes the connection and wipes the page key.
    public func close() {
        connection.close()
        cipher.destroy()
    }

    deinit { close() }
}
