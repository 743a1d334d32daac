import CFerryCipher
import FerryCore

/// The 64-byte key of an encrypted database. The bytes live in memory of their own, never in a
/// Swift array that could be copied around, and are zeroed when the last user lets go (the
/// store keeps only the page key derived from them, and zeroes that when it closes).
public final class EncryptionKey: @unchecked Sendable {
    public static let size = Int(FCIPHER_KEY_SIZE)
    let bytes: UnsafeMutablePointer<UInt8>

    /// Copies the key; `raw` must hold exactly 64 bytes.
    public init(copying raw: UnsafeRawBufferPointer) throws {
        guard raw.count == Self.size, let base = raw.baseAddress else {
            throw FerryError(.invalidArgument, "an encryption key is \(Self.size) bytes, got \(raw.count)")
        }
        bytes = .allocate(capacity: Self.size)
        bytes.initialize(from: base.assumingMemoryBound(to: UInt8.self), count: Self.size)
    }

    public init(_ key: [UInt8]) throws {
        guard key.count == Self.size else { throw FerryError(.invalidArgument, "an encryption key is \(Self.size) bytes, got \(key.count)") }
        bytes = .allocate(capacity: Self.size)
        bytes.initialize(from: key, count: Self.size)
    }

    deinit {
        fcipher_wipe(bytes, Self.size)
        bytes.deallocate()
    }
}
