import FerryCore
import Foundation

/// Reads an app directory in the App Services export layout:
///
///     root_config.json                                   name, app_id
///     auth/providers.json                                auth providers
///     data_sources/<service>/<database>/<collection>/schema.json, rules.json
///     data_sources/<service>/default_rule.json           (optional) rules for the rest
///     sync/config.json                                   flexible sync settings
///     http_endpoints/data_api_config.json                (optional) the Data API and its server keys
///     triggers/<name>.json                               (optional) database triggers with webhooks
///
/// Every problem is an `AppConfigurationError` naming the file.
public enum AppDirectory {
    public static func load(_ path: String) throws -> AppConfiguration {
        let root = URL(fileURLWithPath: path)
        let rootConfig = try object(root, "root_config.json")
        let name = try string(rootConfig, "name", "root_config.json")
        let appId = (rootConfig["app_id"] as? String) ?? name

        let providersFile = "auth/providers.json"
        var providers: [AuthProviderConfiguration] = []
        if FileManager.default.fileExists(atPath: root.appendingPathComponent(providersFile).path) {
            for (key, raw) in try object(root, providersFile).sorted(by: { $0.key < $1.key }) {
                guard let p = raw as? [String: Any] else { throw AppConfigurationError(file: providersFile, "provider '\(key)' is not an object") }
                let type = try string(p, "type", providersFile)
                guard ["anon-user", "local-userpass", "custom-token", "api-key"].contains(type) else {
                    throw AppConfigurationError(file: providersFile, "provider '\(key)' has unknown type '\(type)'")
                }
                var secrets: [String: [String]] = [:]
                for (k, v) in (p["secret_config"] as? [String: Any]) ?? [:] { secrets[k] = (v as? [String]) ?? [] }
                providers.append(AuthProviderConfiguration(
                    name: (p["name"] as? String) ?? key, type: type, disabled: (p["disabled"] as? Bool) ?? false,
                    config: try ((p["config"] as? [String: Any]) ?? [:]).mapValues { try json($0, providersFile) }, secretNames: secrets))
            }
        }

        let syncFile = "sync/config.json"
        let s = try object(root, syncFile)
        var perCollection: [String: [String]] = [:]
        for (k, v) in (s["collection_queryable_fields_names"] as? [String: Any]) ?? [:] {
            guard let fields = v as? [String] else { throw AppConfigurationError(file: syncFile, "collection_queryable_fields_names.\(k) is not a list of names") }
            perCollection[k] = fields
        }
        let sync = SyncConfiguration(
            type: (s["type"] as? String) ?? "flexible", enabled: ((s["state"] as? String) ?? "enabled") == "enabled",
            developmentMode: (s["development_mode_enabled"] as? Bool) ?? false,
            serviceName: (s["service_name"] as? String) ?? "mongodb-atlas", databaseName: (s["database_name"] as? String) ?? "",
            clientMaxOfflineDays: (s["client_max_offline_days"] as? Int) ?? 30,
            recoveryDisabled: (s["is_recovery_mode_disabled"] as? Bool) ?? false,
            queryableFields: try names(s, "queryable_fields_names", syncFile),
            indexedQueryableFields: try names(s, "indexed_queryable_fields_names", syncFile),
            collectionQueryableFields: perCollection, asymmetricTables: try names(s, "asymmetric_tables", syncFile))
        guard sync.type == "flexible" else { throw AppConfigurationError(file: syncFile, "sync type '\(sync.type)' is not supported; Ferry syncs flexibly") }

        var collections: [CollectionConfiguration] = []
        var defaultRules: CollectionRules?
        let sources = root.appendingPathComponent("data_sources")
        for service in try children(sources) {
            let defaultFile = "data_sources/\(service)/default_rule.json"
            if FileManager.default.fileExists(atPath: root.appendingPathComponent(defaultFile).path) {
                defaultRules = try rules(try object(root, defaultFile), defaultFile)
            }
            for database in try children(sources.appendingPathComponent(service)) {
                for collection in try children(sources.appendingPathComponent(service).appendingPathComponent(database)) {
                    let dir = "data_sources/\(service)/\(database)/\(collection)"
                    let schemaFile = dir + "/schema.json"
                    guard FileManager.default.fileExists(atPath: root.appendingPathComponent(schemaFile).path) else { continue }
                    let objectSchema = try schema(try object(root, schemaFile), collection: collection,
                                                  asymmetric: sync.asymmetricTables.contains(collection), schemaFile)
                    let rulesFile = dir + "/rules.json"
                    let r = FileManager.default.fileExists(atPath: root.appendingPathComponent(rulesFile).path)
                        ? try rules(try object(root, rulesFile), rulesFile) : nil
                    collections.append(CollectionConfiguration(name: objectSchema.name, database: database, objectSchema: objectSchema, rules: r))
                }
            }
        }
        var config = AppConfiguration(name: name, appId: appId, authProviders: providers, collections: collections,
                                      defaultRules: defaultRules, sync: sync, dataAPI: try dataAPI(root))
        config.triggers = try triggers(root)
        let schema: Schema
        do { schema = try config.schema } catch let e as FerryError {
            throw AppConfigurationError(file: "data_sources", "the collections do not form a valid schema: \(e.message)")
        }
        for t in config.triggers {
            let file = "triggers/\(t.name).json"
            guard let os = schema.objectSchema(named: t.className) else { throw AppConfigurationError(file: file, "no class '\(t.className)' in the schema") }
            if let m = t.match {
                do { _ = try CompiledQuery(m, on: os) } catch let e as FerryError {
                    throw AppConfigurationError(file: file, "config.match is not a query on '\(t.className)': \(e.message)")
                }
            }
        }
        return config
    }

    /// `http_endpoints/data_api_config.json`: `disabled`, and `server_keys` as a list of
    /// `{"name", "secret_name", "role"}` (names unique, secrets named, each at most once;
    /// `role` optional: the rules' role the key runs as).
    private static func dataAPI(_ root: URL) throws -> DataAPIConfiguration {
        let file = "http_endpoints/data_api_config.json"
        guard FileManager.default.fileExists(atPath: root.appendingPathComponent(file).path) else { return DataAPIConfiguration() }
        let d = try object(root, file)
        var keys: [DataAPIConfiguration.ServerKey] = []
        guard let raw = (d["server_keys"] ?? []) as? [Any] else { throw AppConfigurationError(file: file, "server_keys is not a list") }
        for (n, item) in raw.enumerated() {
            guard let k = item as? [String: Any], let name = k["name"] as? String, !name.isEmpty,
                  let secret = k["secret_name"] as? String, !secret.isEmpty else {
                throw AppConfigurationError(file: file, "server_keys[\(n)] needs a non-empty \"name\" and \"secret_name\"")
            }
            guard !keys.contains(where: { $0.name == name }) else { throw AppConfigurationError(file: file, "the server key name '\(name)' is used twice") }
            guard !keys.contains(where: { $0.secretName == secret }) else {
                throw AppConfigurationError(file: file, "the secret '\(secret)' is named by two server keys")
            }
            var role: String?
            if let r = k["role"] {
                guard let name = r as? String, !name.isEmpty else { throw AppConfigurationError(file: file, "server_keys[\(n)].role must be a role's name") }
                role = name
            }
            keys.append(.init(name: name, secretName: secret, role: role))
        }
        return DataAPIConfiguration(disabled: (d["disabled"] as? Bool) ?? false, serverKeys: keys)
    }

    /// `triggers/<name>.json`, each file one trigger named as the file is; secrets named at
    /// most once.
    private static func triggers(_ root: URL) throws -> [TriggerConfiguration] {
        let dir = root.appendingPathComponent("triggers")
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dir.path, isDirectory: &isDirectory) else { return [] }
        // A triggers folder that cannot be read must not start a server without its triggers.
        let items: [String]
        do {
            guard isDirectory.boolValue else { throw CocoaError(.fileReadUnknown) }
            items = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        } catch {
            throw AppConfigurationError(file: "triggers", "not a readable folder: \(error.localizedDescription)")
        }
        var out: [TriggerConfiguration] = []
        for item in items.sorted() where item.hasSuffix(".json") {
            let file = "triggers/\(item)"
            let t = try TriggerConfiguration.parse(try object(root, file), file: file, expectedName: String(item.dropLast(5)))
            out.append(t)
        }
        return out
    }

    // MARK: files

    private static func children(_ url: URL) throws -> [String] {
        guard let items = try? FileManager.default.contentsOfDirectory(atPath: url.path) else { return [] }
        return items.filter { item in
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: url.appendingPathComponent(item).path, isDirectory: &isDir) && isDir.boolValue
        }.sorted()
    }

    private static func object(_ root: URL, _ file: String) throws -> [String: Any] {
        let url = root.appendingPathComponent(file)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw AppConfigurationError(file: file, "missing or unreadable (looked in \(root.path))")
        }
        let parsed: JSON
        do { parsed = try JSON.parse(Array(data)) } catch let e as FerryError {
            throw AppConfigurationError(file: file, "not valid JSON: \(e.message)")
        }
        guard case .object = parsed, let o = native(parsed) as? [String: Any] else { throw AppConfigurationError(file: file, "must hold a JSON object") }
        return o
    }

    /// A JSON value as the readers here take it: objects `[String: Any]` (a member named twice:
    /// the first), lists `[Any]`, `String`, `Bool`, integers `Int`, other numbers `Double`,
    /// and null `JSONNull`. Parsed by FerryCore's `JSON` (the one parser, bounded and fuzzed),
    /// so a boolean is never a number and a number never a boolean.
    static func native(_ v: JSON) -> Any {
        switch v {
        case .null: return JSONNull()
        case .bool(let b): return b
        case .int(let i): return Int(i)
        case .double(let d): return d
        case .string(let s): return s
        case .array(let items): return items.map(native)
        case .object(let members):
            var o: [String: Any] = [:]
            for (k, m) in members where o[k] == nil { o[k] = native(m) }
            return o
        }
    }

    /// JSON's null in the values `native` makes.
    struct JSONNull {}

    private static func string(_ o: [String: Any], _ key: String, _ file: String) throws -> String {
        guard let s = o[key] as? String, !s.isEmpty else { throw AppConfigurationError(file: file, "'\(key)' must be a non-empty string") }
        return s
    }

    private static func names(_ o: [String: Any], _ key: String, _ file: String) throws -> [String] {
        guard let v = o[key] else { return [] }
        guard let list = v as? [String] else { throw AppConfigurationError(file: file, "'\(key)' must be a list of names") }
        return list
    }

    static func json(_ v: Any, _ file: String) throws -> JSONValue {
        switch v {
        case is JSONNull: return .null
        case let b as Bool: return .bool(b)
        case let i as Int: return .int(Int64(i))
        case let d as Double: return .double(d)
        case let s as String: return .string(s)
        case let a as [Any]: return .array(try a.map { try json($0, file) })
        // A dictionary keeps no member order: the keys are sorted, so a file reads alike every time.
        case let o as [String: Any]: return .object(try o.sorted { $0.key < $1.key }.map { ($0.key, try json($0.value, file)) })
        default: throw AppConfigurationError(file: file, "unexpected JSON value \(v)")
        }
    }
}
