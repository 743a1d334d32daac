/// The state of the connection a session syncs over (the seeds' `connectionState`). A paused,
/// closed or failed session reads `disconnected`.
public enum ConnectionState: Int32, Sendable, CustomStringConvertible {
    case disconnected = 0, connecting = 1, connected = 2

    public var description: String {
        switch self {
        case .disconnected: "disconnected"
        case .connecting: "connecting"
        case .connected: "connected"
        }
    }
}
