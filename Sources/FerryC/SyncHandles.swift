import CFerry
import FerryClient
import FerryCore
import FerryStore

/// The object behind a `ferry_app_t *`, with the host's error handler and log callback.
final class AppHandle: @unchecked Sendable {
    let app: App
    private let lock = ThreadLock()
    private var handlerUserdata: UnsafeMutableRawPointer?
    private var handlerFree: ferry_free_fn?

    init(app: App) { self.app = app }

    func setErrorHandler(_ cb: ferry_sync_error_cb?, _ userdata: UnsafeMutableRawPointer?, _ userdataFree: ferry_free_fn?) {
        let previous = lock.withLock { () -> (UnsafeMutableRawPointer?, ferry_free_fn?) in
            defer { handlerUserdata = userdata; handlerFree = userdataFree }
            return (handlerUserdata, handlerFree)
        }
        if let cb {
            let box = CCallback(userdata: userdata)
            app.errorHandler = { session, error in
                let h = SessionHandle.lent(session)
                withSyncError(error) { e in cb(box.userdata, h, e) }
            }
        } else {
            app.errorHandler = nil
        }
        previous.1?(previous.0)
    }

    func release() {
        app.close()
        let (u, f) = lock.withLock { (handlerUserdata, handlerFree) }
        f?(u)
    }
}

/// The object behind a `ferry_user_t *`, lending its id.
final class UserHandle {
    let user: SyncUser
    let id: UnsafePointer<CChar>
    private let storage = CValueStorage()
    init(user: SyncUser) {
        self.user = user
        self.id = storage.cString(user.id)
    }
}

/// The object behind a `ferry_sync_session_t *`. The error handler gets a handle of the same
/// session (registered while the session lives, so a handler may call the session's functions).
final class SessionHandle: @unchecked Sendable {
    let session: SyncSession
    private(set) var pointer: OpaquePointer?
    nonisolated(unsafe) private static var bySession: [ObjectIdentifier: OpaquePointer] = [:]
    private static let lock = ThreadLock()

    init(session: SyncSession) { self.session = session }

    func register() -> OpaquePointer {
        let p = HandleTable.shared.register(self, kind: .session)
        pointer = p
        Self.lock.withLock { Self.bySession[ObjectIdentifier(session)] = p }
        return p
    }

    func unregister() { _ = Self.lock.withLock { Self.bySession.removeValue(forKey: ObjectIdentifier(session)) } }

    /// The host's handle of a session (nil if the host freed it).
    static func lent(_ s: SyncSession) -> OpaquePointer? { lock.withLock { bySession[ObjectIdentifier(s)] } }
}

/// The object behind a `ferry_subscription_set_t *`: an editable copy with lent strings.
final class SubscriptionSetHandle {
    var set: SubscriptionSet
    private var storage = CValueStorage()
    private var lent: [(UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafePointer<CChar>)]? = nil
    private var lentError: UnsafePointer<CChar>?

    init(set: SubscriptionSet) { self.set = set }

    func edited() {
        lent = nil
        lentError = nil
        storage = CValueStorage()
    }

    func strings(_ i: Int) -> (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafePointer<CChar>) {
        if lent == nil { lent = set.subscriptions.map { (storage.cString($0.name), storage.cString($0.objectType), storage.cString($0.query)) } }
        return lent![i]
    }

    var errorMessage: UnsafePointer<CChar> {
        if let e = lentError { return e }
        let e = storage.cString(set.errorMessage)
        lentError = e
        return e
    }
}

/// A host userdata pointer carried into Swift closures.
struct CCallback: @unchecked Sendable {
    let userdata: UnsafeMutableRawPointer?
}

/// Calls `body` with a C view of a sync error, valid for the call.
func withSyncError(_ e: SyncError, _ body: (UnsafePointer<ferry_sync_error_t>) -> Void) {
    let storage = CValueStorage()
    var writes: [ferry_compensating_write_t] = e.compensatingWrites.map {
        ferry_compensating_write_t(object_type: storage.cString($0.objectType), primary_key: storage.cValue($0.primaryKey), reason: storage.cString($0.reason))
    }
    // What each compensating write's revert took (SPEC F-NOLOSS), for
    // ferry_sync_error_reverted_object; entries naming one object share its record.
    let records = e.revertedObjects.map(RevertedObjectView.init)
    let reverted: [RevertedObjectView?] = e.compensatingWrites.map { w in
        records.first { $0.object.objectType == w.objectType && $0.object.primaryKey == w.primaryKey }
    }
    let message = storage.cString(e.message)
    let backupPath = e.clientResetBackupPath.map { storage.cString($0) }
    let token = e.clientResetToken.map { storage.cString($0) }
    func call(_ report: UnsafePointer<ferry_client_reset_report_t>?) {
        withExtendedLifetime(storage) {
            writes.withUnsafeMutableBufferPointer { buf in
                var c = ferry_sync_error_t(code: e.code, message: message, is_fatal: e.isFatal, action: Int32(e.action.rawValue),
                                           compensating_writes: buf.isEmpty ? nil : UnsafePointer(buf.baseAddress), compensating_writes_count: buf.count,
                                           client_reset_report: report, client_reset_backup_path: backupPath, client_reset_token: token)
                withUnsafePointer(to: &c) { p in RevertedRecords.shared.lending(p, reverted) { body(p) } }
            }
        }
    }
    if let report = e.clientResetReport { withClientResetReport(report) { call($0) } } else { call(nil) }
}

/// Calls `body` with a C view of compensating writes (the pre-flight check's finding), valid
/// for the call; NULL and 0 for none.
func withCompensatingWrites(_ list: [CompensatingWrite], _ body: (UnsafePointer<ferry_compensating_write_t>?, Int) -> Void) {
    let storage = CValueStorage()
    var writes: [ferry_compensating_write_t] = list.map {
        ferry_compensating_write_t(object_type: storage.cString($0.objectType), primary_key: storage.cValue($0.primaryKey), reason: storage.cString($0.reason))
    }
    withExtendedLifetime(storage) {
        writes.withUnsafeMutableBufferPointer { buf in body(buf.isEmpty ? nil : UnsafePointer(buf.baseAddress), buf.count) }
    }
}

/// Calls `body` with a C view of a client-reset report, valid for the call.
func withClientResetReport(_ r: ClientResetReport, _ body: (UnsafePointer<ferry_client_reset_report_t>) -> Void) {
    let storage = CValueStorage()
    var entries: [ferry_client_reset_entry_t] = r.entries.map {
        ferry_client_reset_entry_t(object_type: storage.cString($0.objectType), primary_key: storage.cValue($0.primaryKey),
                                   outcome: $0.outcome == .recovered ? Int32(FERRY_CLIENT_RESET_RECOVERED.rawValue) : Int32(FERRY_CLIENT_RESET_DISCARDED.rawValue),
                                   reason: storage.cString($0.reason))
    }
    withExtendedLifetime(storage) {
        entries.withUnsafeMutableBufferPointer { buf in
            var c = ferry_client_reset_report_t(recovered: r.recovered, unsynced_changesets: r.unsyncedChangesets,
                                                entries: buf.isEmpty ? nil : UnsafePointer(buf.baseAddress), entries_count: buf.count)
            withUnsafePointer(to: &c) { body($0) }
        }
    }
}

/// Calls a status callback with nil or a C view of the error.
func callStatus(_ cb: ferry_status_cb, _ box: CCallback, _ error: FerryError?) {
    guard let error else { return cb(box.userdata, nil) }
    let storage = CValueStorage()
    var e = ferry_error_t(code: error.code.rawValue, message: storage.cString(error.message))
    withExtendedLifetime(storage) { withUnsafePointer(to: &e) { cb(box.userdata, $0) } }
}
