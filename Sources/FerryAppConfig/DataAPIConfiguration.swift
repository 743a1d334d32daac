/// The Data API's settings (`http_endpoints/data_api_config.json`, the App Services export's
/// file, with Ferry's `server_keys`): whether it is on, and the server keys a backend calls it
/// with. A key's secret is named here and its value comes from the server's environment, like
/// every other secret, never from the directory. No file: the Data API is off.
public struct DataAPIConfiguration: Sendable, Equatable {
    public struct ServerKey: Sendable, Equatable {
        /// What the sync log and errors call the key (never its secret).
        public var name: String
        /// The environment variable that holds the key's secret.
        public var secretName: String
        /// The role of the app's rules the key runs as (nil: the system, past every rule).
        public var role: String?

        public init(name: String, secretName: String, role: String? = nil) {
            self.name = name
            self.secretName = secretName
            self.role = role
        }
    }

    public var disabled: Bool
    public var serverKeys: [ServerKey]

    public init(disabled: Bool = true, serverKeys: [ServerKey] = []) {
        self.disabled = disabled
        self.serverKeys = serverKeys
    }
}
