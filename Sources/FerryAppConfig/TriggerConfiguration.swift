import Foundation

/// A database trigger (`triggers/<name>.json`, in the App Services export's shape): changes of
/// one class, of some operation types, optionally only those whose new values match a query,
/// each POSTed to a webhook signed with a secret (named here, its value from the server's
/// environment like every other secret). docs/backend.md, "Triggers".
///
///     {"name": "itemChanged", "type": "DATABASE", "disabled": false,
///      "config": {"collection": "Item", "operation_types": ["INSERT", "UPDATE", "DELETE"],
///                 "match": "complexity > 3"},
///      "webhook": {"url": "https://backend.example/hooks/items", "secret_name": "FERRY_TRIGGER_SECRET_ITEMS"}}
public struct TriggerConfiguration: Sendable, Equatable {
    public enum Operation: String, Sendable, CaseIterable {
        case insert = "INSERT", update = "UPDATE", delete = "DELETE"
    }

    public var name: String
    public var disabled: Bool
    /// The class (collection) whose changes it delivers.
    public var className: String
    public var operations: Set<Operation>
    /// A query in Ferry's query language on the object's values after the change (a delete:
    /// its last values); nil delivers every change of the chosen operations.
    public var match: String?
    public var url: String
    /// The environment variable holding the secret the deliveries are signed with.
    public var secretName: String
    /// Failed attempts in a row after which the trigger pauses (`max_failures`, default 10).
    public var maxFailures: Int

    public init(name: String, disabled: Bool = false, className: String, operations: Set<Operation>, match: String? = nil, url: String,
                secretName: String, maxFailures: Int = 10) {
        self.name = name
        self.disabled = disabled
        self.className = className
        self.operations = operations
        self.match = match
        self.url = url
        self.secretName = secretName
        self.maxFailures = maxFailures
    }

    /// Reads one trigger file; `file` names it in errors. The name must be the file's.
    static func parse(_ d: [String: Any], file: String, expectedName: String) throws -> TriggerConfiguration {
        func fail(_ message: String) -> AppConfigurationError { AppConfigurationError(file: file, message) }
        guard let name = d["name"] as? String, name == expectedName else { throw fail("\"name\" must be the file's name, '\(expectedName)'") }
        guard name.utf8.count <= 64, name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7a) || $0 == 0x5f || $0 == 0x2d }) else {
            throw fail("a trigger's name has 1 to 64 letters, digits, '_' or '-'")
        }
        guard (d["type"] as? String ?? "DATABASE") == "DATABASE" else { throw fail("only DATABASE triggers are supported") }
        guard let config = d["config"] as? [String: Any] else { throw fail("\"config\" is missing") }
        guard let className = config["collection"] as? String, !className.isEmpty else { throw fail("config.collection names the class") }
        guard let types = config["operation_types"] as? [String], !types.isEmpty else {
            throw fail("config.operation_types lists INSERT, UPDATE, REPLACE (an UPDATE here) or DELETE")
        }
        var operations: Set<Operation> = []
        for t in types {
            if t == "REPLACE" { operations.insert(.update); continue }
            guard let op = Operation(rawValue: t) else { throw fail("unknown operation type '\(t)' (INSERT, UPDATE, REPLACE, DELETE)") }
            operations.insert(op)
        }
        var match: String?
        if let m = config["match"] {
            guard let text = m as? String else {
                throw fail("config.match is a query in Ferry's query language on the new values (a string), e.g. \"complexity > 3\"")
            }
            if !text.isEmpty { match = text }
        }
        guard let webhook = d["webhook"] as? [String: Any], let url = webhook["url"] as? String,
              let secret = webhook["secret_name"] as? String, !secret.isEmpty else {
            throw fail("\"webhook\" needs \"url\" and \"secret_name\" (the environment variable with the signing secret)")
        }
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(), let host = parts.host, !host.isEmpty else {
            throw fail("webhook.url '\(url)' is not an http(s) URL")
        }
        // Deliveries carry the app's data: over TLS, but for a receiver on this machine.
        let loopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host.lowercased())
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw fail("webhook.url must be https:// (http:// only to 127.0.0.1, localhost or ::1)")
        }
        let maxFailures = (d["max_failures"] as? Int) ?? 10
        guard (1...1000).contains(maxFailures) else { throw fail("max_failures is between 1 and 1000") }
        return TriggerConfiguration(name: name, disabled: (d["disabled"] as? Bool) ?? false, className: className, operations: operations,
                                    match: match, url: url, secretName: secret, maxFailures: maxFailures)
    }
}
