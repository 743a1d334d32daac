/// Where a sync session is, for the `ferry_sessions{state=…}` gauge: bound without a
/// subscription set yet, evaluating a new set and sending its bootstrap, or syncing.
enum SessionState: String, Sendable, CaseIterable {
    case bound
    case bootstrapping
    case active
}
