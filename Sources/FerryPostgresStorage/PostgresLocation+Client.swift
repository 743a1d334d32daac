import PostgresNIO

/// The postgres-nio configurations for a location: the pooled client's and the single
/// connection's (the startup probe), with the same TLS choice.
extension PostgresLocation {
    private var tlsConfiguration: TLSConfiguration? {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch tlsMode {
        case .disable: return nil
        case .prefer, .require: tls.certificateVerification = .none
        case .verifyFull:
            // The host name is checked against the certificate; the roots are the system's,
            // or the file `sslrootcert` names.
            if let rootCertificatePath { tls.trustRoots = .file(rootCertificatePath) }
        }
        return tls
    }

    func clientConfiguration(maximumConnections: Int) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS
        switch (tlsMode, tlsConfiguration) {
        case (.prefer, let c?): tls = .prefer(c)
        case (.require, let c?), (.verifyFull, let c?): tls = .require(c)
        default: tls = .disable
        }
        var configuration = PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.maximumConnections = maximumConnections
        // A node whose database is unreachable fails its operations (devices retry) within
        // seconds rather than holding them for postgres-nio's default 10 s per attempt.
        configuration.options.connectTimeout = .seconds(3)
        // A node that dies in the middle of a write transaction holds the app's write lock until
        // PostgreSQL notices; on a real network that can take as long as TCP keepalive. This
        // bounds it: an open transaction idle for 30 s is ended by the server.
        configuration.options.additionalStartupParameters = [("application_name", "ferry-server"),
                                                             ("idle_in_transaction_session_timeout", "30000")]
        return configuration
    }

    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS
        switch (tlsMode, tlsConfiguration) {
        case (.prefer, let c?): tls = .prefer(try NIOSSLContext(configuration: c))
        case (.require, let c?), (.verifyFull, let c?): tls = .require(try NIOSSLContext(configuration: c))
        default: tls = .disable
        }
        return PostgresConnection.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
    }
}
