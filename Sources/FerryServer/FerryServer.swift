import FerryAppConfig
import FerryAuth
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle

/// A Ferry server: reads the app directory, prepares its data directory and authentication,
/// and serves HTTP. `ferry-server` is a thin executable over it; tests run it in-process.
public enum FerryServer {
    /// Builds the application; run it with `runService()` (SIGTERM/SIGINT stop it cleanly).
    /// `onRunning` receives the bound port (useful with port 0).
    public static func make(_ configuration: ServerConfiguration, logger: Logger = Logger(label: "ferry-server"),
                            onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws -> some ApplicationProtocol {
        let app: AppConfiguration
        do { app = try AppDirectory.load(configuration.appDirectory) } catch let e as AppConfigurationError {
            throw ServerStartError("bad app directory '\(configuration.appDirectory)': \(e)")
        }
        // Only the server's user may read its data (users, tokens, synced data): 0700.
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let store = try await ServerStore.open(configuration, app: app, logger: logger)
        let secret = try await tokenSecret(configuration, store: store)
        let tokens = try await TokenService(secret: secret, appId: app.appId)
        var customJWT: CustomJWTVerifier?
        if let provider = app.authProviders.first(where: { $0.type == "custom-token" && !$0.disabled }) {
            customJWT = try await customVerifier(provider, configuration)
        }
        // Checked before anything listens: a short admin token stops the start.
        let admin = try AdminToken(token: configuration.secrets["FERRY_ADMIN_TOKEN"],
                                   failures: AdminFailureThrottle(limits: configuration.adminFailureLimits))
        let dataKeys = try DataAPIKeys(app.dataAPI, secrets: configuration.secrets,
                                       roles: Set(try app.schema.classes.flatMap { app.rules(for: $0.name).roles.map(\.name) }))
        let directory = store.users
        let auth = AuthService(providers: app.authProviders, directory: directory, tokens: tokens,
                               hasher: PasswordHasher(parameters: configuration.passwordHashing), customJWT: customJWT,
                               limits: configuration.authLimits)
        let metrics = ServerMetrics(postgres: store.database != nil)
        let syncLog = SyncLogRecorder(node: configuration.nodeId, storage: store.operations, retention: configuration.syncLogRetention,
                                      metrics: metrics, logger: logger)
        let telemetry = SyncTelemetry(node: configuration.nodeId, metrics: metrics, live: LiveConnections(), log: syncLog)
        let publisher = LiveConnectionPublisher(node: configuration.nodeId, live: telemetry.live, storage: store.operations,
                                                interval: configuration.connectionPublishInterval, logger: logger)

        let router = Self.router(configuration)
        AuthRoutes(appId: app.appId, auth: auth, metrics: metrics).add(to: router)
        let events = ServerEventLog()
        let hub = try await SyncHub(app: app, storage: store.sync, directory: directory, logger: logger, events: events, limits: configuration.syncLimits,
                                    telemetry: telemetry, beforeUploadMerge: configuration.beforeUploadMerge)
        let schema = try app.schema
        // The head as the change feed tells it, for the Data API's streams and the triggers
        // (nothing listens when neither is on).
        let heads = dataKeys.enabled || !app.triggers.isEmpty ? HeadWatch(store.sync.changeFeed) : nil
        let authors = ChangeAuthors(store.sync)
        let backendWrites = try BackendWrites(hub: hub, storage: store.sync, app: app, schema: schema)
        DataAPIRoutes(appId: app.appId, keys: dataKeys, storage: store.sync, schema: schema,
                      writes: backendWrites, heads: dataKeys.enabled ? heads : nil, auth: auth, app: app,
                      authors: authors, log: syncLog).add(to: router)
        // A backend's SQL writes to the SQL tables (PostgreSQL), integrated by every node.
        let sqlWrites = store.capturedWrites.map {
            SQLWriteIntegrator(storage: $0, writes: backendWrites, schema: schema, log: syncLog, metrics: metrics, logger: logger)
        }
        var triggers: TriggerRunner?
        if let heads, !app.triggers.isEmpty {
            triggers = try TriggerRunner(app: app, schema: schema, secrets: configuration.secrets, storage: store.sync, store: store.triggers, heads: heads,
                                         authors: authors, node: configuration.nodeId, timing: configuration.triggerTiming, metrics: metrics, logger: logger)
        }
        // The admin API, its console and /metrics behind the token: on a listener of their own
        // with --admin-port (the public port then answers them 404), else on the public port.
        let adminRouter = configuration.adminPort == nil ? router : Self.router(configuration)
        AdminRoutes(admin: admin, directory: directory, hub: hub, events: events).add(to: adminRouter)
        ConsoleRoutes().add(to: adminRouter)
        TriggerAdminRoutes(admin: admin, app: app, storage: store.sync, store: store.triggers, runner: triggers, events: events).add(to: adminRouter)
        AdminOperationsRoutes(admin: admin, directory: directory, hub: hub, telemetry: telemetry, operations: store.operations, events: events,
                              connectionFreshness: publisher.freshness, settings: AdminSettings(app: app, directory: configuration.appDirectory)).add(to: adminRouter)
        let metricsRoutes = MetricsRoutes(telemetry: telemetry, storage: store.sync, database: store.database)
        metricsRoutes.add(to: adminRouter, admin: admin)
        var services: [any Service] = [StoreService(hub: hub, store: store, syncLog: syncLog, publisher: publisher, triggers: triggers,
                                                    sqlWrites: sqlWrites)]
        if let adminPort = configuration.adminPort {
            // Plain HTTP/1 with the idle timeout; the main port's connection guard (count,
            // header and write-stall timeouts) is tied to its sync upgrade, and this listener
            // is meant for operators only.
            var adminServer: HTTPServerBuilder = .http1(configuration: .init(idleTimeout: TimeAmount(configuration.connectionLimits.httpIdleTimeout)))
            if let cert = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
                adminServer = try .tls(adminServer, tlsConfiguration: try tlsConfiguration(certificate: cert, key: key))
            }
            let scheme = configuration.tlsCertificatePath == nil ? "http" : "https"
            let report = configuration.onAdminListening
            services.append(Application(router: adminRouter, server: adminServer,
                                        configuration: .init(address: .hostname(configuration.adminHost, port: adminPort), serverName: "ferry-server-admin"),
                                        onServerRunning: { channel in
                                            let port = channel.localAddress?.port ?? adminPort
                                            logger.info("admin API and console on \(scheme)://\(configuration.adminHost):\(port)/admin")
                                            await report?(port)
                                        },
                                        logger: logger))
        }
        if let metricsPort = configuration.metricsPort {
            let metricsRouter = Router()
            metricsRoutes.addOpen(to: metricsRouter)
            let report = configuration.onMetricsListening
            services.append(Application(router: metricsRouter,
                                        configuration: .init(address: .hostname(configuration.metricsHost, port: metricsPort), serverName: "ferry-server-metrics"),
                                        onServerRunning: { channel in
                                            let port = channel.localAddress?.port ?? metricsPort
                                            logger.info("metrics on http://\(configuration.metricsHost):\(port)/metrics")
                                            await report?(port)
                                        },
                                        logger: logger))
        }
        let sync = SyncRoutes(appId: app.appId, auth: auth, hub: hub, limits: configuration.connectionLimits,
                              userLimits: configuration.syncLimits, logger: logger, telemetry: telemetry)
        logger.info("serving app '\(app.name)' (\(app.appId)) from \(store.sync.description): \(app.collections.count) collection(s), providers \(app.authProviders.filter { !$0.disabled }.map(\.type).sorted())")
        var server: HTTPServerBuilder = .ferry(sync: sync, limits: configuration.connectionLimits, logger: logger)
        switch (configuration.tlsCertificatePath, configuration.tlsKeyPath) {
        case (nil, nil): break
        case let (cert?, key?):
            server = try .tls(server, tlsConfiguration: try tlsConfiguration(certificate: cert, key: key))
        default: throw ServerStartError("TLS needs both a certificate (--tls-certificate) and a private key (--tls-key)")
        }
        let scheme = configuration.tlsCertificatePath == nil ? "http" : "https"
        return Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "ferry-server",
                                 availableConnectionsDelegate: MaximumAvailableConnections(configuration.connectionLimits.acceptCeiling, logger: logger)),
            services: services,
            onServerRunning: { channel in
                // First on the listening socket: a failed accept must pause, not spin.
                try? await channel.eventLoop.submit {
                    try channel.pipeline.syncOperations.addHandler(DescriptorShortageBackoff(reserve: configuration.descriptorReserve, logger: logger), position: .first)
                }.get()
                let port = channel.localAddress?.port ?? configuration.port
                logger.info("ferry-server listening on \(scheme)://\(configuration.host):\(port)")
                await onRunning(port)
            },
            logger: logger)
    }

    /// A router with the error mapping, the client address from a trusted proxy, and `/health`.
    static func router(_ configuration: ServerConfiguration) -> Router<ServerRequestContext> {
        let router = Router(context: ServerRequestContext.self)
        router.add(middleware: AuthErrorMiddleware())
        if let proxies = configuration.trustedProxies { router.add(middleware: ClientAddressMiddleware(proxies)) }
        router.get("health") { _, _ in "ok" }
        return router
    }

    static func tlsConfiguration(certificate: String, key: String) throws -> TLSConfiguration {
        do {
            let certificates = try NIOSSLCertificate.fromPEMFile(certificate)
            guard !certificates.isEmpty else { throw ServerStartError("the TLS certificate file \(certificate) holds no certificate") }
            return TLSConfiguration.makeServerConfiguration(certificateChain: certificates.map { .certificate($0) },
                                                            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        } catch let e as ServerStartError {
            throw e
        } catch {
            throw ServerStartError("cannot load the TLS certificate \(certificate) or key \(key): \(error)")
        }
    }

    /// The access-token secret: `FERRY_TOKEN_SECRET` if given; else, on the embedded store, one
    /// made once and kept in the data directory (mode 600), so tokens survive restarts; on
    /// PostgreSQL, one kept in the database, so every node signs and verifies the same tokens.
    static func tokenSecret(_ c: ServerConfiguration, store: ServerStore) async throws -> [UInt8] {
        if let s = c.secrets["FERRY_TOKEN_SECRET"] {
            guard s.utf8.count >= 32 else { throw ServerStartError("FERRY_TOKEN_SECRET must have at least 32 bytes") }
            return Array(s.utf8)
        }
        guard c.database == .embedded else {
            return try await store.sync.sharedSecret(named: "access-token", create: randomSecret)
        }
        let path = c.dataDirectory + "/token-secret"
        if let existing = FileManager.default.contents(atPath: path), existing.count >= 32 { return Array(existing) }
        let bytes = randomSecret()
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes), attributes: [.posixPermissions: 0o600]) else {
            throw ServerStartError("cannot write \(path)")
        }
        return bytes
    }

    /// 48 bytes from the system's CSPRNG.
    @Sendable static func randomSecret() -> [UInt8] {
        var g = SystemRandomNumberGenerator()
        return (0..<48).map { _ in UInt8.random(in: 0...255, using: &g) }
    }

    /// The custom-token verifier from the provider's config and the secret it names.
    static func customVerifier(_ p: AuthProviderConfiguration, _ c: ServerConfiguration) async throws -> CustomJWTVerifier {
        var algorithm = "HS256"
        if case .string(let a)? = p.config["signingAlgorithm"] { algorithm = a }
        var audiences: [String] = []
        if case .array(let list)? = p.config["audience"] { audiences = list.compactMap { if case .string(let s) = $0 { return s } else { return nil } } }
        if case .string(let one)? = p.config["audience"] { audiences = [one] }
        var requireAny = false
        if case .bool(let b)? = p.config["requireAnyAudience"] { requireAny = b }
        // Optional: tokens must then name this issuer (`iss`).
        var issuer: String?
        if case .string(let i)? = p.config["issuer"] { issuer = i }
        guard let keyName = p.secretNames["signingKeys"]?.first ?? p.secretNames["signingKey"]?.first else {
            throw ServerStartError("auth provider '\(p.name)' (custom-token) names no signing key in secret_config")
        }
        guard let keyValue = c.secrets[keyName] else {
            throw ServerStartError("auth provider '\(p.name)' needs the secret '\(keyName)': set the environment variable \(keyName)")
        }
        let key: CustomJWTVerifier.Key
        switch algorithm {
        case "HS256": key = .hs256(secret: Array(keyValue.utf8))
        case "RS256": key = .rs256(publicKeyPEM: keyValue)
        default: throw ServerStartError("auth provider '\(p.name)': signingAlgorithm \(algorithm) is not supported (HS256, RS256)")
        }
        do {
            return try await CustomJWTVerifier(key: key, audiences: audiences, requireAnyAudience: requireAny, issuer: issuer)
        } catch let e as AuthError {
            throw ServerStartError("auth provider '\(p.name)': \(e.description)")
        }
    }
}
