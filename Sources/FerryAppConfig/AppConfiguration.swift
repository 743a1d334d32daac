import FerryCore

/// An app as the App Services export layout describes it: what a Ferry server serves.
public struct AppConfiguration: Sendable {
    public var name: String
    public var appId: String
    public var authProviders: [AuthProviderConfiguration]
    /// The collections with a schema, by name; their schemas form the app's `schema`.
    public var collections: [CollectionConfiguration]
    /// Rules for collections that have none of their own (`default_rule.json`), if given.
    public var defaultRules: CollectionRules?
    public var sync: SyncConfiguration
    /// The Data API (off unless the directory turns it on).
    public var dataAPI = DataAPIConfiguration()
    /// Database triggers (`triggers/*.json`), by name.
    public var triggers: [TriggerConfiguration] = []

    /// The object schema of every collection, as clients and the server use it.
    public var schema: Schema {
        get throws { try Schema(collections.map(\.objectSchema)) }
    }

    /// The rules that govern a collection: its own, else the default ones, else none (no access).
    public func rules(for collection: String) -> CollectionRules {
        collections.first { $0.name == collection }?.rules ?? defaultRules ?? CollectionRules(roles: [])
    }
}

public struct AuthProviderConfiguration: Sendable, Equatable {
    public var name: String
    /// `anon-user`, `local-userpass`, `custom-token`, `api-key`.
    public var type: String
    public var disabled: Bool
    /// The provider's settings (`config`), as JSON-shaped values.
    public var config: [String: JSONValue]
    /// Names of secrets (`secret_config`), whose values the server takes from its own
    /// configuration, never from the directory.
    public var secretNames: [String: [String]]

    public init(name: String, type: String, disabled: Bool, config: [String: JSONValue], secretNames: [String: [String]]) {
        self.name = name
        self.type = type
        self.disabled = disabled
        self.config = config
        self.secretNames = secretNames
    }
}

public struct CollectionConfiguration: Sendable, Equatable {
    public var name: String
    public var database: String
    public var objectSchema: ObjectSchema
    public var rules: CollectionRules?
}

/// `sync/config.json`.
public struct SyncConfiguration: Sendable, Equatable {
    public var type: String
    public var enabled: Bool
    public var developmentMode: Bool
    public var serviceName: String
    public var databaseName: String
    public var clientMaxOfflineDays: Int
    public var recoveryDisabled: Bool
    /// Fields every collection's subscriptions may use (`_id` is always allowed).
    public var queryableFields: [String]
    public var indexedQueryableFields: [String]
    /// Fields only one collection's subscriptions may use.
    public var collectionQueryableFields: [String: [String]]
    public var asymmetricTables: [String]

    /// Whether a subscription on `collection` may filter on `field`.
    public func isQueryable(_ field: String, in collection: String) -> Bool {
        field == "_id" || queryableFields.contains(field) || indexedQueryableFields.contains(field)
            || (collectionQueryableFields[collection]?.contains(field) ?? false)
    }
}

/// A JSON value, for the parts of the configuration Ferry keeps as they are: FerryCore's one
/// JSON type.
public typealias JSONValue = JSON
