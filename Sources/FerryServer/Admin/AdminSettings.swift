import FerryCore
import FerryAppConfig
import Foundation

/// The read-only view of the app for the admin API's `GET settings`: the sync settings, the
/// roles as the rules files state them, and the app directory's JSON files. Made once at
/// start (the server does not reload its app). Never any secret: secret values live in the
/// environment, not in the directory, and a file whose name says "secret" is left out anyway.
struct AdminSettings: Sendable {
    /// The response body.
    let json: String

    /// Files larger than this are listed with their content cut.
    static let maxFileBytes = 256 << 10

    init(app: AppConfiguration, directory: String) {
        var files: [(String, String)] = []
        var roles: [JSON] = []
        let root = URL(fileURLWithPath: directory).standardizedFileURL
        let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey])
        var paths: [String] = []
        while let url = walker?.nextObject() as? URL {
            guard url.pathExtension == "json", !url.lastPathComponent.lowercased().contains("secret") else { continue }
            let full = url.standardizedFileURL.path
            guard full.hasPrefix(root.path + "/") else { continue }
            paths.append(String(full.dropFirst(root.path.count + 1)))
        }
        for path in paths.sorted() {
            guard let data = FileManager.default.contents(atPath: root.appendingPathComponent(path).path) else { continue }
            var text = String(decoding: data.prefix(Self.maxFileBytes), as: UTF8.self)
            if data.count > Self.maxFileBytes { text += "\n… (\(data.count) bytes)" }
            files.append((path, text))
            // A rules file: its roles, each with the collection it governs.
            if path.hasSuffix("/rules.json") || path == "default_rule.json" || path.hasSuffix("/default_rule.json"),
               let rules = try? JSON.parse(Array(data)), case .object(let members) = rules,
               case .array(let list)? = members.first(where: { $0.0 == "roles" })?.1 {
                let collection = rules["collection"] ?? (path.hasSuffix("default_rule.json") ? "(default)" : "")
                for case .object(let role) in list {
                    roles.append(.object([("collection", .string(collection))] + role.map { ($0.0 == "applyWhen" ? "apply_when" : $0.0, $0.1) }))
                }
            }
        }
        let body: JSON = .object([
            ("app_name", .string(app.name)),
            ("app_id", .string(app.appId)),
            ("queryable_fields", .array(app.sync.queryableFields.map(JSON.string))),
            ("indexed_queryable_fields", .array(app.sync.indexedQueryableFields.map(JSON.string))),
            ("roles", .array(roles)),
            ("max_offline_days", .int(Int64(app.sync.clientMaxOfflineDays))),
            ("recovery_mode", .string(app.sync.recoveryDisabled ? "disabled" : "recover_unsynced_changes")),
            ("development_mode", .bool(app.sync.developmentMode)),
            ("collections", .array(app.collections.map { .string($0.name) })),
            ("auth_providers", .array(app.authProviders.map { .object([("name", .string($0.name)), ("type", .string($0.type)), ("disabled", .bool($0.disabled))]) })),
            ("files", .array(files.map { .object([("path", .string($0.0)), ("content", .string($0.1))]) })),
        ])
        json = body.text
    }
}
