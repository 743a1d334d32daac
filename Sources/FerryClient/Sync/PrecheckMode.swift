/// What a synced database does with a write transaction that its subscriptions or the write
/// rules the server published would reject (SPEC F-PRECHECK). The check runs at commit, on
/// the device, offline too; the server stays the authority either way.
public enum PrecheckMode: Int32, Sendable {
    /// No check: a commit reads nothing extra (the default).
    case off = 0
    /// The commit succeeds; the precheck handler gets the would-be compensating writes at once.
    case warn = 1
    /// The commit fails with `writeRejected` and is rolled back; the handler gets the same list.
    case strict = 2
}
