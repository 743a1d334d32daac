import Crypto
import CryptoExtras
import Foundation

/// Password hashing with scrypt (memory-hard), stored as `scrypt$N$r$p$<salt>$<hash>` (base64),
/// so parameters can be raised later without breaking existing hashes.
public struct PasswordHasher: Sendable {
    public struct Parameters: Sendable, Equatable {
        public var rounds: Int
        public var blockSize: Int
        public var parallelism: Int
        public init(rounds: Int, blockSize: Int, parallelism: Int) {
            self.rounds = rounds
            self.blockSize = blockSize
            self.parallelism = parallelism
        }
        /// N = 2^15, r = 8, p = 1: about 32 MB and tens of milliseconds per hash.
        public static let standard = Parameters(rounds: 1 << 15, blockSize: 8, parallelism: 1)
        /// For tests only: fast and weak.
        public static let fastForTests = Parameters(rounds: 1 << 10, blockSize: 8, parallelism: 1)
    }

    public let parameters: Parameters

    public init(parameters: Parameters = .standard) { self.parameters = parameters }

    public func hash(_ password: String) throws -> String {
        var salt = [UInt8](repeating: 0, count: 16)
        var g = SystemRandomNumberGenerator()
        for i in salt.indices { salt[i] = UInt8.random(in: 0...255, using: &g) }
        let key = try derive(password, salt: salt, parameters)
        return "scrypt$\(parameters.rounds)$\(parameters.blockSize)$\(parameters.parallelism)$\(Data(salt).base64EncodedString())$\(Data(key).base64EncodedString())"
    }

    /// A well-formed stored hash in this hasher's parameters that no password matches (its key
    /// is all zeros). A login for an unknown email verifies against it, so it costs the same
    /// time as a login for a known one and cannot tell which emails are registered.
    public var unmatchableHash: String {
        "scrypt$\(parameters.rounds)$\(parameters.blockSize)$\(parameters.parallelism)$\(Data(count: 16).base64EncodedString())$\(Data(count: 32).base64EncodedString())"
    }

    /// Whether the password matches a stored hash (in constant time for the comparison).
    /// A malformed stored hash matches nothing.
    public func verify(_ password: String, against stored: String) -> Bool {
        let parts = stored.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0] == "scrypt", let n = Int(parts[1]), let r = Int(parts[2]), let p = Int(parts[3]),
              n >= 2, n <= 1 << 20, r >= 1, r <= 32, p >= 1, p <= 16,
              let salt = Data(base64Encoded: String(parts[4])), let expected = Data(base64Encoded: String(parts[5])),
              let key = try? derive(password, salt: Array(salt), Parameters(rounds: n, blockSize: r, parallelism: p)),
              key.count == expected.count else { return false }
        var diff: UInt8 = 0
        for (a, b) in zip(key, expected) { diff |= a ^ b }
        return diff == 0
    }

    private func derive(_ password: String, salt: [UInt8], _ p: Parameters) throws -> [UInt8] {
        let key = try KDF.Scrypt.deriveKey(from: Array(password.utf8), salt: salt, outputByteCount: 32,
                                           rounds: p.rounds, blockSize: p.blockSize, parallelism: p.parallelism)
        return key.withUnsafeBytes { Array($0) }
    }
}
