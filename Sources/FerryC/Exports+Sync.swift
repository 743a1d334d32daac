import CFerry
import FerryClient
import FerryCore
import FerryStore

// Apps, users, synced databases, subscriptions and sync errors. See ferry.h.

func appHandle(_ p: OpaquePointer?) throws -> AppHandle { try HandleTable.shared.lookup(p, .app, as: AppHandle.self) }
func userHandle(_ p: OpaquePointer?) throws -> UserHandle { try HandleTable.shared.lookup(p, .user, as: UserHandle.self) }
func sessionHandle(_ p: OpaquePointer?) throws -> SessionHandle { try HandleTable.shared.lookup(p, .session, as: SessionHandle.self) }
func subscriptionSetHandle(_ p: OpaquePointer?) throws -> SubscriptionSetHandle {
    try HandleTable.shared.lookup(p, .subscriptionSet, as: SubscriptionSetHandle.self)
}

private func optionalString(_ p: UnsafePointer<CChar>?, _ name: String) throws -> String? {
    guard let p else { return nil }
    return try hostString(p, name)
}

@c @implementation
public func ferry_app_options_init(_ opts: UnsafeMutablePointer<ferry_app_options_t>!, _ version: UInt32) -> Int32 {
    ferryCall {
        let o = try required(opts, "opts")
        try checkVersion(version, olderSizes: appOptionSizes, what: "ferry_app_options_t")
        var d = appOptionDefaults
        d.version = version
        // What a host of versions 1 to 3 reads as verify_peer: true, certificates are verified.
        d.reserved = version < 4
        d.request_timeout_ms = 60_000
        d.log_level = LogLevel.info.rawValue
        writeVersioned(o, d, olderSizes: appOptionSizes)
    }
}

/// The sizes of the app options' older versions (see `readVersioned`).
private let appOptionSizes = [MemoryLayout<ferry_app_options_t>.offset(of: \.multiplex_sessions)!,
                              MemoryLayout<ferry_app_options_t>.offset(of: \.encryption_key)!,
                              MemoryLayout<ferry_app_options_t>.offset(of: \.insecure_skip_verify)!]

/// The defaults of the fields a version-1 host does not have. The security fields default to
/// zero, false, the safe value: a struct a host zero-filled verifies certificates and refuses
/// plain http to another machine, and so does every host of versions 1 to 3 (their
/// `verify_peer`, now `reserved`, is never read: an opt-out needs version 4's field).
private var appOptionDefaults: ferry_app_options_t {
    var d = ferry_app_options_t()
    d.multiplex_sessions = true
    d.read_timeout_ms = 120_000
    d.ping_interval_ms = 60_000
    d.reconnect_delay_min_ms = 1_000
    d.reconnect_delay_max_ms = 16_000
    return d
}

@c @implementation
public func ferry_app_new(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ opts: UnsafePointer<ferry_app_options_t>!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        let o = try readVersioned(try required(opts, "opts"), appOptionDefaults, olderSizes: appOptionSizes, what: "ferry_app_options_t")
        guard let level = LogLevel(rawValue: o.log_level) else { throw FerryError(.invalidArgument, "unknown log level \(o.log_level)") }
        guard o.request_timeout_ms > 0 else { throw FerryError(.invalidArgument, "request_timeout_ms must be positive") }
        var config = App.Configuration(appId: try hostString(o.app_id, "opts->app_id"), baseURL: try hostString(o.base_url, "opts->base_url"),
                                       baseDirectory: try hostString(o.base_directory, "opts->base_directory"),
                                       tls: TLSOptions(caFile: try optionalString(o.ca_file, "opts->ca_file"), insecureSkipVerify: o.insecure_skip_verify),
                                       requestTimeoutMs: o.request_timeout_ms, logLevel: level, multiplexSessions: o.multiplex_sessions,
                                       readTimeoutMs: o.read_timeout_ms, pingIntervalMs: o.ping_interval_ms,
                                       reconnectDelayMinMs: o.reconnect_delay_min_ms, reconnectDelayMaxMs: o.reconnect_delay_max_ms)
        config.allowInsecureHTTP = o.allow_insecure_http
        config.encryptionKey = try o.encryption_key.map { try EncryptionKey(copying: UnsafeRawBufferPointer(start: $0, count: EncryptionKey.size)) }
        let app = try App(config)
        if let cb = o.log_callback {
            let box = CCallback(userdata: o.log_userdata)
            app.logger = { level, message in message.withCString { cb(box.userdata, level.rawValue, $0) } }
        }
        out.pointee = HandleTable.shared.register(AppHandle(app: app), kind: .app)
    }
}

@c @implementation
public func ferry_app_free(_ app: OpaquePointer!) {
    HandleTable.shared.remove(app, .app, as: AppHandle.self)?.release()
}

private func credentials(_ c: ferry_credentials_t) throws -> Credentials {
    switch c.kind {
    case 0: return .anonymous
    case 1: return .emailPassword(email: try hostString(c.email, "credentials->email"), password: try hostString(c.password, "credentials->password"))
    case 2: return .jwt(try hostString(c.token, "credentials->token"))
    case 3: return .apiKey(try hostString(c.token, "credentials->token"))
    default: throw FerryError(.invalidArgument, "unknown credentials kind \(c.kind)")
    }
}

@c @implementation
public func ferry_app_log_in(_ app: OpaquePointer!, _ creds: UnsafePointer<ferry_credentials_t>!, _ callback: ferry_user_cb!, _ userdata: UnsafeMutableRawPointer!) -> Int32 {
    ferryCall {
        let a = try appHandle(app)
        let c = try credentials(try required(creds, "credentials").pointee)
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        let box = CCallback(userdata: userdata)
        a.app.login(c) { result in
            switch result {
            case .success(let user):
                callback(box.userdata, HandleTable.shared.register(UserHandle(user: user), kind: .user), nil)
            case .failure(let e):
                let storage = CValueStorage()
                var err = ferry_error_t(code: e.code.rawValue, message: storage.cString(e.message))
                withExtendedLifetime(storage) { withUnsafePointer(to: &err) { callback(box.userdata, nil, $0) } }
            }
        }
    }
}

@c @implementation
public func ferry_app_register_email(_ app: OpaquePointer!, _ email: UnsafePointer<CChar>!, _ password: UnsafePointer<CChar>!,
                                     _ callback: ferry_status_cb!, _ userdata: UnsafeMutableRawPointer!) -> Int32 {
    ferryCall {
        let a = try appHandle(app)
        let e = try hostString(email, "email"), p = try hostString(password, "password")
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        let box = CCallback(userdata: userdata)
        a.app.register(email: e, password: p) { result in
            if case .failure(let err) = result { callStatus(callback, box, err) } else { callStatus(callback, box, nil) }
        }
    }
}

@c @implementation
public func ferry_app_log_out(_ app: OpaquePointer!, _ user: OpaquePointer!, _ callback: ferry_status_cb!, _ userdata: UnsafeMutableRawPointer!) -> Int32 {
    ferryCall {
        let a = try appHandle(app)
        let u = try userHandle(user)
        guard u.user.app === a.app else { throw FerryError(.invalidArgument, "the user belongs to another app") }
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        let box = CCallback(userdata: userdata)
        a.app.logOut(u.user) { result in
            if case .failure(let err) = result { callStatus(callback, box, err) } else { callStatus(callback, box, nil) }
        }
    }
}

@c @implementation
public func ferry_app_current_user(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ app: OpaquePointer!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        let a = try appHandle(app)
        out.pointee = a.app.currentUser.map { HandleTable.shared.register(UserHandle(user: $0), kind: .user) }
    }
}

@c @implementation
public func ferry_app_user_count(_ out: UnsafeMutablePointer<Int>!, _ app: OpaquePointer!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        out.pointee = try appHandle(app).app.allUsers.count
    }
}

@c @implementation
public func ferry_app_get_user(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ app: OpaquePointer!, _ index: Int) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        let users = try appHandle(app).app.allUsers
        guard index >= 0 && index < users.count else { throw FerryError(.outOfRange, "user index \(index) is out of range (\(users.count) users)") }
        out.pointee = HandleTable.shared.register(UserHandle(user: users[index]), kind: .user)
    }
}

@c @implementation
public func ferry_user_id(_ out: UnsafeMutablePointer<UnsafePointer<CChar>?>!, _ user: OpaquePointer!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        out.pointee = try userHandle(user).id
    }
}

@c @implementation
public func ferry_user_state(_ out: UnsafeMutablePointer<Int32>!, _ user: OpaquePointer!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        out.pointee = try userHandle(user).user.state.rawValue
    }
}

@c @implementation
public func ferry_user_free(_ user: OpaquePointer!) {
    _ = HandleTable.shared.remove(user, .user, as: UserHandle.self)
}

@c @implementation
public func ferry_app_set_sync_error_handler(_ app: OpaquePointer!, _ callback: ferry_sync_error_cb!, _ userdata: UnsafeMutableRawPointer!,
                                             _ userdataFree: ferry_free_fn!) -> Int32 {
    ferryCall {
        let a: AppHandle
        do { a = try appHandle(app) } catch {
            // The userdata was handed over: it is freed even when the call fails.
            userdataFree?(userdata)
            throw error
        }
        a.setErrorHandler(callback, userdata, userdataFree)
    }
}

@c @implementation
public func ferry_sync_options_init(_ opts: UnsafeMutablePointer<ferry_sync_options_t>!, _ version: UInt32) -> Int32 {
    ferryCall {
        let o = try required(opts, "opts")
        try checkVersion(version, olderSizes: syncOptionSizes, what: "ferry_sync_options_t")
        var d = syncOptionDefaults
        d.version = version
        writeVersioned(o, d, olderSizes: syncOptionSizes)
    }
}

/// The sizes of the sync options' older versions (see `readVersioned`).
private let syncOptionSizes = [MemoryLayout<ferry_sync_options_t>.offset(of: \.download_before_open)!,
                               MemoryLayout<ferry_sync_options_t>.offset(of: \.client_reset_mode)!,
                               MemoryLayout<ferry_sync_options_t>.offset(of: \.precheck_mode)!,
                               MemoryLayout<ferry_sync_options_t>.offset(of: \.encryption_key)!]

private var syncOptionDefaults: ferry_sync_options_t {
    var d = ferry_sync_options_t()
    d.open_timeout_ms = 30_000
    return d
}

/// The host's sync options as Swift values.
private struct SyncOpenRequest {
    let path: String
    let schema: Schema
    let options: SyncOpenOptions

    init(_ opts: UnsafePointer<ferry_sync_options_t>?) throws {
        let o = try readVersioned(try required(opts, "opts"), syncOptionDefaults, olderSizes: syncOptionSizes, what: "ferry_sync_options_t")
        path = try hostString(o.path, "opts->path")
        guard let s = o.schema else { throw FerryError(.invalidArgument, "opts->schema must not be NULL") }
        schema = try HandleTable.shared.lookup(s, .schema, as: SchemaHandle.self).schema
        guard let download = DownloadBeforeOpen(rawValue: o.download_before_open) else {
            throw FerryError(.invalidArgument, "unknown download_before_open \(o.download_before_open)")
        }
        guard o.open_timeout_ms > 0 else { throw FerryError(.invalidArgument, "opts->open_timeout_ms must be positive") }
        guard let resetMode = ClientResetMode(rawValue: o.client_reset_mode) else {
            throw FerryError(.invalidArgument, "unknown client_reset_mode \(o.client_reset_mode)")
        }
        var options = SyncOpenOptions(downloadBeforeOpen: download, openTimeoutMs: o.open_timeout_ms, inMemory: o.in_memory,
                                      rerunInitialSubscriptions: o.rerun_initial_subscriptions, clientResetMode: resetMode)
        guard let precheck = PrecheckMode(rawValue: o.precheck_mode) else {
            throw FerryError(.invalidArgument, "unknown precheck_mode \(o.precheck_mode)")
        }
        options.precheckMode = precheck
        if let cb = o.precheck_callback {
            let box = CCallback(userdata: o.precheck_userdata)
            options.precheckHandler = { rejected, committed in
                withCompensatingWrites(rejected) { writes, count in cb(box.userdata, writes, count, committed) }
            }
        }
        if let key = o.encryption_key {
            guard !o.in_memory else { throw FerryError(.invalidArgument, "an in-memory database cannot be encrypted: give no encryption_key") }
            options.encryptionKey = try EncryptionKey(copying: UnsafeRawBufferPointer(start: key, count: EncryptionKey.size))
        }
        if let cb = o.before_reset {
            let box = CCallback(userdata: o.before_reset_userdata)
            options.beforeReset = { before in withLentDatabases([before]) { cb(box.userdata, $0[0]) } }
        }
        if let cb = o.after_reset {
            let box = CCallback(userdata: o.after_reset_userdata)
            options.afterReset = { before, after, report in
                withLentDatabases([before, after]) { dbs in withClientResetReport(report) { cb(box.userdata, dbs[0], dbs[1], $0) } }
            }
        }
        if let cb = o.initial_subscriptions {
            let box = CCallback(userdata: o.initial_subscriptions_userdata)
            options.initialSubscriptions = { set in
                let handle = SubscriptionSetHandle(set: set)
                let p = HandleTable.shared.register(handle, kind: .subscriptionSet)
                let rc = cb(box.userdata, p)
                _ = HandleTable.shared.remove(p, .subscriptionSet, as: SubscriptionSetHandle.self)
                guard rc == 0 else { throw FerryError(.invalidArgument, "the initial subscriptions callback returned \(rc)") }
                set = handle.set
            }
        }
        self.options = options
    }

    /// The host's database handle: a second handle on the session's store.
    func hostDatabase() throws -> OpaquePointer {
        let scheduler = try LoopScheduler()
        do {
            var configuration = DatabaseConfiguration(location: options.inMemory ? .memory(path) : .file(path), schema: schema, synced: true,
                                                      encryptionKey: options.encryptionKey)
            // The session may be in standby (another process is the sync agent): this handle
            // shares its store, role or not.
            configuration.allowStandby = true
            let db = try Database.open(configuration, scheduler: scheduler)
            return HandleTable.shared.register(DatabaseHandle(database: db, polling: nil), kind: .database)
        } catch {
            scheduler.shutdown()
            throw error
        }
    }
}

@c @implementation
public func ferry_sync_open(_ outSession: UnsafeMutablePointer<OpaquePointer?>!, _ outDb: UnsafeMutablePointer<OpaquePointer?>!,
                            _ user: OpaquePointer!, _ opts: UnsafePointer<ferry_sync_options_t>!) -> Int32 {
    ferryCall {
        let outSession = try required(outSession, "out_session")
        let outDb = try required(outDb, "out_db")
        let u = try userHandle(user)
        let request = try SyncOpenRequest(opts)
        guard let app = u.user.app else { throw FerryError(.closed, "the user's app was freed") }
        let session = try app.openSynced(user: u.user, path: request.path, schema: request.schema, options: request.options)
        do { outDb.pointee = try request.hostDatabase() } catch {
            session.close()
            throw error
        }
        outSession.pointee = SessionHandle(session: session).register()
    }
}

@c @implementation
public func ferry_sync_open_async(_ user: OpaquePointer!, _ opts: UnsafePointer<ferry_sync_options_t>!, _ callback: ferry_sync_open_cb!,
                                  _ userdata: UnsafeMutableRawPointer!) -> Int32 {
    ferryCall {
        let u = try userHandle(user)
        let request = try SyncOpenRequest(opts)
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        guard let app = u.user.app else { throw FerryError(.closed, "the user's app was freed") }
        let box = CCallback(userdata: userdata)
        let fail: @Sendable (FerryError) -> Void = { e in
            let storage = CValueStorage()
            var err = ferry_error_t(code: e.code.rawValue, message: storage.cString(e.message))
            withExtendedLifetime(storage) { withUnsafePointer(to: &err) { callback(box.userdata, nil, nil, $0) } }
        }
        let req = UncheckedSendable(request)
        app.openSynced(user: u.user, path: request.path, schema: request.schema, options: request.options) { result in
            switch result {
            case .failure(let e): fail(e)
            case .success(let session):
                do {
                    let db = try req.value.hostDatabase()
                    callback(box.userdata, SessionHandle(session: session).register(), db, nil)
                } catch {
                    session.close()
                    fail(error as? FerryError ?? FerryError(.internal, "\(error)"))
                }
            }
        }
    }
}

private func sessionCall(_ session: OpaquePointer?, _ callback: ferry_status_cb?, _ userdata: UnsafeMutableRawPointer?,
                         _ body: (SyncSession, @escaping @Sendable (FerryError?) -> Void) throws -> Void) -> Int32 {
    ferryCall {
        let s = try sessionHandle(session)
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        let box = CCallback(userdata: userdata)
        try body(s.session) { callStatus(callback, box, $0) }
    }
}

@c @implementation
public func ferry_sync_wait_for_upload(_ session: OpaquePointer!, _ callback: ferry_status_cb!, _ userdata: UnsafeMutableRawPointer!) -> Int32 {
    sessionCall(session, callback, userdata) { s, done in s.waitForUpload(done) }
}

@c @implementation
public func ferry_sync_wait_for_download(_ session: OpaquePointer!, _ callback: ferry_status_cb!, _ userdata: UnsafeMutableRawPointer!) -> Int32 {
    sessionCall(session, callback, userdata) { s, done in s.waitForDownload(done) }
}

@c @implementation
public func ferry_sync_wait_for_subscriptions(_ session: OpaquePointer!, _ version: UInt64, _ callback: ferry_status_cb!,
                                              _ userdata: UnsafeMutableRawPointer!) -> Int32 {
    sessionCall(session, callback, userdata) { s, done in s.waitForSubscriptions(version: version, done) }
}

@c @implementation
public func ferry_sync_session_free(_ session: OpaquePointer!) {
    guard let h = HandleTable.shared.remove(session, .session, as: SessionHandle.self) else { return }
    h.unregister()
    h.session.close()
}

@c @implementation
public func ferry_sync_subscriptions(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ session: OpaquePointer!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        let set = try sessionHandle(session).session.subscriptions()
        out.pointee = HandleTable.shared.register(SubscriptionSetHandle(set: set), kind: .subscriptionSet)
    }
}

@c @implementation
public func ferry_subscription_set_free(_ set: OpaquePointer!) {
    _ = HandleTable.shared.remove(set, .subscriptionSet, as: SubscriptionSetHandle.self)
}

@c @implementation
public func ferry_subscription_set_version(_ out: UnsafeMutablePointer<UInt64>!, _ set: OpaquePointer!) -> Int32 {
    ferryCall { try required(out, "out").pointee = try subscriptionSetHandle(set).set.version }
}

@c @implementation
public func ferry_subscription_set_state(_ out: UnsafeMutablePointer<Int32>!, _ set: OpaquePointer!) -> Int32 {
    ferryCall { try required(out, "out").pointee = Int32(try subscriptionSetHandle(set).set.state.rawValue) }
}

@c @implementation
public func ferry_subscription_set_error(_ out: UnsafeMutablePointer<UnsafePointer<CChar>?>!, _ set: OpaquePointer!) -> Int32 {
    ferryCall { try required(out, "out").pointee = try subscriptionSetHandle(set).errorMessage }
}

@c @implementation
public func ferry_subscription_set_count(_ out: UnsafeMutablePointer<Int>!, _ set: OpaquePointer!) -> Int32 {
    ferryCall { try required(out, "out").pointee = try subscriptionSetHandle(set).set.subscriptions.count }
}

@c @implementation
public func ferry_subscription_set_get(_ outName: UnsafeMutablePointer<UnsafePointer<CChar>?>!, _ outType: UnsafeMutablePointer<UnsafePointer<CChar>?>!,
                                       _ outQuery: UnsafeMutablePointer<UnsafePointer<CChar>?>!, _ set: OpaquePointer!, _ index: Int) -> Int32 {
    ferryCall {
        let h = try subscriptionSetHandle(set)
        guard index >= 0 && index < h.set.subscriptions.count else {
            throw FerryError(.outOfRange, "subscription index \(index) is out of range (\(h.set.subscriptions.count) subscriptions)")
        }
        let (n, t, q) = h.strings(index)
        outName?.pointee = n
        outType?.pointee = t
        outQuery?.pointee = q
    }
}

@c @implementation
public func ferry_subscription_set_add(_ set: OpaquePointer!, _ name: UnsafePointer<CChar>!, _ type: UnsafePointer<CChar>!,
                                       _ query: UnsafePointer<CChar>!) -> Int32 {
    ferryCall {
        let h = try subscriptionSetHandle(set)
        let n = try hostString(name, "name"), t = try hostString(type, "object_type"), q = try hostString(query, "query")
        guard !t.isEmpty else { throw FerryError(.invalidArgument, "object_type must not be empty") }
        h.set.add(name: n, objectType: t, query: q)
        h.edited()
    }
}

@c @implementation
public func ferry_subscription_set_remove(_ out: UnsafeMutablePointer<Bool>!, _ set: OpaquePointer!, _ name: UnsafePointer<CChar>!) -> Int32 {
    ferryCall {
        let h = try subscriptionSetHandle(set)
        let removed = h.set.remove(name: try hostString(name, "name"))
        h.edited()
        out?.pointee = removed
    }
}

@c @implementation
public func ferry_subscription_set_remove_type(_ out: UnsafeMutablePointer<Int>!, _ set: OpaquePointer!, _ type: UnsafePointer<CChar>!) -> Int32 {
    ferryCall {
        let h = try subscriptionSetHandle(set)
        let removed = h.set.removeAll(ofType: try hostString(type, "object_type"))
        h.edited()
        out?.pointee = removed
    }
}

@c @implementation
public func ferry_subscription_set_remove_all(_ set: OpaquePointer!) -> Int32 {
    ferryCall {
        let h = try subscriptionSetHandle(set)
        h.set.removeAll()
        h.edited()
    }
}

@c @implementation
public func ferry_sync_update_subscriptions(_ out: UnsafeMutablePointer<UInt64>!, _ session: OpaquePointer!, _ set: OpaquePointer!) -> Int32 {
    ferryCall {
        let s = try sessionHandle(session)
        let subs = try subscriptionSetHandle(set).set.subscriptions
        let v = try s.session.updateSubscriptions { $0.subscriptions = subs }
        out?.pointee = v
    }
}
