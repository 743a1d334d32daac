/// Why the server told a device to reset (`ferry_client_resets_total{trigger=…}`).
enum ClientResetTrigger: String, Sendable, CaseIterable {
    /// The server does not know the client file (forgotten, or sync was enabled again after
    /// a terminate, which forgets every file).
    case unknownClientFile = "unknown_client_file"
    /// Offline longer than the app's client maximum offline time.
    case maxOfflineTime = "max_offline_time"
    /// The device claims a server version the server never reached (a restored backup).
    case serverVersionAhead = "server_version_ahead"
}
