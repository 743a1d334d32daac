/// What an email and a password may be. Checked before anything is looked up or hashed, so
/// a refusal says nothing about which accounts exist and costs nothing.
enum CredentialRules {
    static let minimumPasswordLength = 6
    /// scrypt reads the whole password; a megabyte-long one costs more than it protects.
    static let maximumPasswordBytes = 256
    /// RFC 5321: 64 bytes of local part, `@`, 255 of domain.
    static let maximumEmailBytes = 320

    /// The stored form of an email (lowercased), refusing one that no account can have: too
    /// long, or with a control character (NUL included). With `registering`, it must also look
    /// like an address (`x@y`).
    static func normalizedEmail(_ email: String, registering: Bool) throws -> String {
        guard email.utf8.count <= maximumEmailBytes else { throw AuthError.invalidEmail("it has more than \(maximumEmailBytes) bytes") }
        guard !email.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw AuthError.invalidEmail("it contains a control character")
        }
        let normalized = email.lowercased()
        if registering {
            guard normalized.contains("@"), !normalized.hasPrefix("@"), !normalized.hasSuffix("@") else {
                throw AuthError.invalidEmail("it needs a name, '@' and a domain")
            }
        }
        return normalized
    }

    static func checkLength(of password: String, registering: Bool) throws {
        guard password.utf8.count <= maximumPasswordBytes else { throw AuthError.passwordTooLong(maximumBytes: maximumPasswordBytes) }
        if registering && password.count < minimumPasswordLength { throw AuthError.passwordTooShort(minimum: minimumPasswordLength) }
    }
}
