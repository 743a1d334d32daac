/// What a session is doing (the seeds' `SyncSession.State`): `active` syncs (or tries to, while
/// offline), `paused` was suspended by the host and resumes on `resume()`, `inactive` ended for
/// good (closed, logged out, or a fatal error).
public enum SessionState: Int32, Sendable, CustomStringConvertible {
    case active = 0, paused = 1, inactive = 2

    public var description: String {
        switch self {
        case .active: "active"
        case .paused: "paused"
        case .inactive: "inactive"
        }
    }
}
