import FerryCore
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
        /// N = 2^17, r = 8, p = 1, OWASP's minimum for scrypt: 128 MiB and a few hundred
        /// milliseconds per hash (so the hashing pool's few threads bound the memory).
        public static let standard = Parameters(rounds: 1 << 17, blockSize: 8, parallelism: 1)
        /// N = 2^15, what Ferry used before issue 22: such hashes still verify, and a
        /// successful login replaces them with one at `standard` (`needsRehash`).
        public static let before2026 = Parameters(rounds: 1 << 15, blockSize: 8, parallelism: 1)
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

    /// The parameters a stored hash was made with; nil for a malformed one or one out of the
    /// bounds this server verifies (N up to 2^20, r up to 32, p up to 16: at most 1 GiB).
    public static func parameters(of stored: String) -> Parameters? {
        let parts = stored.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0] == "scrypt", let n = Int(parts[1]), let r = Int(parts[2]), let p = Int(parts[3]),
              n >= 2, n <= 1 << 20, n & (n - 1) == 0, r >= 1, r <= 32, p >= 1, p <= 16 else { return nil }
        return Parameters(rounds: n, blockSize: r, parallelism: p)
    }

    /// Whether a stored hash (one the password was just verified against) should be replaced
    /// by a new one at this hasher's parameters: it was made at other ones (a lower cost from
    /// an older version, or a test's).
    public func needsRehash(_ stored: String) -> Bool { Self.parameters(of: stored) != parameters }

    /// Whether the password matches a stored hash (in constant time for the comparison).
    /// A malformed stored hash matches nothing. Throws (`busy`) when the hash cannot be
    /// computed (at N=2^17 scrypt needs 128 MiB): a right password must not be answered, and
    /// counted against the account, as a wrong one.
    public func verify(_ password: String, against stored: String) throws -> Bool {
        let parts = stored.split(separator: "$", omittingEmptySubsequences: false)
        guard let parameters = Self.parameters(of: stored),
              let salt = Data(base64Encoded: String(parts[4])), let expected = Data(base64Encoded: String(parts[5])) else { return false }
        let key: [UInt8]
        do { key = try derive(password, salt: Array(salt), parameters) } catch {
            throw FerryError(.busy, "cannot hash the password now (\(error)); try again")
        }
        guard key.count == expected.count else { return false }
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
