import CFerryCipher
import FerryCore

/// The key of an encrypted database, as Ferry keeps it. The host's 64 bytes are read once, when
/// this is made, to derive the master key each file's own page key comes from (and the page key
/// of version 1 files); the 64 bytes themselves are never copied or kept (docs/encryption.md).
/// The derived keys live in memory of their own, never in a Swift array that could be copied
/// around, and are zeroed when the last user lets go.
public final class EncryptionKey: @unchecked Sendable {
    public static let size = Int(FCIPHER_KEY_SIZE)
    /// fcipher_keys: the master key and the version 1 page key.
    let keys: OpaquePointer

    /// Derives the keys from `raw`, which must hold exactly 64 bytes; `raw` is read during the
    /// call only.
    public init(copying raw: UnsafeRawBufferPointer) throws {
        guard raw.count == Self.size, let base = raw.baseAddress else {
            throw FerryError(.invalidArgument, "an encryption key is \(Self.size) bytes, got \(raw.count)")
        }
        keys = try Self.derive(base.assumingMemoryBound(to: UInt8.self))
    }

    public init(_ key: [UInt8]) throws {
        guard key.count == Self.size else { throw FerryError(.invalidArgument, "an encryption key is \(Self.size) bytes, got \(key.count)") }
        keys = try key.withUnsafeBufferPointer { try Self.derive($0.baseAddress!) }
    }

    private static func derive(_ key: UnsafePointer<UInt8>) throws -> OpaquePointer {
        var out: OpaquePointer?
        let rc = fcipher_keys_derive(&out, key)
        guard rc == 0, let out else { throw FerryError(.io, "cannot derive the encryption keys (SQLite error \(rc))") }
        return out
    }

    deinit { fcipher_keys_free(keys) }
}
