import FerryCore
import ArgumentParser
import FerryServer
import Foundation
import Hummingbird
import Logging

/// `ferry-server --app-dir DIR --data DIR --port N [--database postgres://...]`: serves one
/// app. Secrets (custom JWT keys, FERRY_TOKEN_SECRET) come from the environment. Stops cleanly on SIGTERM and SIGINT.
struct FerryServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ferry-server", abstract: "Serve a Ferry app.")

    @Option(name: .customLong("app-dir"), help: "The app directory (App Services export layout).")
    var appDir: String

    @Option(name: .customLong("data"), help: "Where the server keeps its state.")
    var data: String

    @Option(name: .customLong("database"), help: ArgumentHelp(
        "The store: postgres://USER[:PASSWORD]@HOST:PORT/DB for PostgreSQL (several nodes may share it); without it, SQLite files in --data.",
        discussion: "Also read from FERRY_DATABASE_URL when the flag is absent."))
    var database: String?

    @Option(name: .customLong("database-connections"), help: "The most connections this node opens to PostgreSQL (its pool).")
    var databaseConnections: Int = 20

    @Option(help: "The address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "The port (0: any free port, printed at start).")
    var port: Int = 0

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    @Option(name: .customLong("log-format"), help: "text (default) or json: one JSON object per line, with connection_id and user_id on every sync line.")
    var logFormat: String = "text"

    @OptionGroup(title: "Operations")
    var operations: OperationsOptions

    @Option(name: .customLong("tls-certificate"), help: "PEM certificate chain: serve HTTPS and WSS (with --tls-key).")
    var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: "PEM private key of the TLS certificate.")
    var tlsKey: String?

    @Option(name: .customLong("port-file"), help: "Write the port to this file once listening (for tests and scripts with --port 0).")
    var portFile: String?

    @OptionGroup(title: "Limits and timeouts")
    var connectionLimits: ConnectionLimitOptions

    @OptionGroup(title: "Sync limits")
    var syncLimits: SyncLimitOptions

    @OptionGroup(title: "Authentication limits")
    var authLimits: AuthLimitOptions

    func run() async throws {
        MallocArenas.cap()
        switch logFormat {
        case "text": break
        case "json": LoggingSystem.bootstrap { JSONLogHandler(label: $0) }
        default: throw ValidationError("--log-format must be text or json")
        }
        var logger = Logger(label: "ferry-server")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        var config = ServerConfiguration(appDirectory: appDir, dataDirectory: data, host: host, port: port,
                                         secrets: ProcessInfo.processInfo.environment, tlsCertificatePath: tlsCertificate, tlsKeyPath: tlsKey)
        if let url = database ?? ProcessInfo.processInfo.environment["FERRY_DATABASE_URL"], !url.isEmpty {
            config.database = .postgres(url: url)
        }
        guard databaseConnections >= 2 else { throw ValidationError("--database-connections must be at least 2") }
        config.databaseConnections = databaseConnections
        config.connectionLimits = connectionLimits.limits
        config.syncLimits = syncLimits.limits
        config.authLimits = authLimits.limits
        config.trustedProxies = try authLimits.proxies()
        if authLimits.weakPasswordHashingForTests {
            do { try config.weakenPasswordHashingForLocalTests() } catch let e as ServerStartError { throw ValidationError(e.description) }
            logger.warning("--weak-password-hashing-for-tests: new password hashes are weak (scrypt N = 2^10); for tests only")
        }
        try operations.apply(to: &config)
        do {
            let portFile = self.portFile
            let portLogger = logger
            let app = try await FerryServer.make(config, logger: logger) { port in
                guard let portFile else { return }
                // Written whole then renamed, so a reader never sees a partial number.
                let tmp = portFile + ".tmp"
                guard FileManager.default.createFile(atPath: tmp, contents: Data("\(port)\n".utf8)) else {
                    // Whoever waits for the file (a script, a test) would wait in vain: say why.
                    portLogger.error("cannot write the port file \(tmp) (listening on port \(port))")
                    return
                }
                do {
                    if FileManager.default.fileExists(atPath: portFile) {
                        _ = try FileManager.default.replaceItemAt(URL(fileURLWithPath: portFile), withItemAt: URL(fileURLWithPath: tmp))
                    } else {
                        try FileManager.default.moveItem(atPath: tmp, toPath: portFile)
                    }
                } catch {
                    portLogger.error("cannot write the port file \(portFile) (listening on port \(port)): \(error)")
                }
            }
            try await app.runService(gracefulShutdownSignals: [.sigterm, .sigint])
        } catch let e as ServerStartError {
            logger.critical("\(e.description)")
            throw ExitCode(2)
        }
    }
}

/// The entry point: parses the command line, then runs the server on Swift's cooperative pool
/// while the main thread waits for it. Not an `async` main: on Linux that ends the main thread
/// in `dispatch_main`, which valgrind cannot run (it stops with an internal error), and the
/// instruction budgets (bench/budgets) count the server's upload path under callgrind. Nothing
/// needs the main queue: signals come through ServiceLifecycle's own dispatch queue.
@main
enum FerryServerMain {
    static func main() {
        let command: FerryServerCommand
        do { command = try FerryServerCommand.parse() } catch { FerryServerCommand.exit(withError: error) }
        let finished = DispatchSemaphore(value: 0)
        let failure = LockedFailure()
        // Detached: `main` is the main actor's, and a task that inherited it would wait for
        // the main thread, which waits for the task.
        Task.detached {
            do { try await command.run() } catch { failure.set(error) }
            finished.signal()
        }
        finished.wait()
        if let error = failure.get() { FerryServerCommand.exit(withError: error) }
    }
}

/// The server's error, handed from its task to the main thread.
private final class LockedFailure: Sendable {
    private let error = LockedValue<Error?>(nil)
    func set(_ e: Error) { error.withLock { $0 = e } }
    func get() -> Error? { error.withLock { $0 } }
}
