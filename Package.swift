// swift-tools-version:6.0
import Foundation
import PackageDescription

/// libferry.so carries the Swift runtime inside, is named libferry.so (SONAME) and exports only
/// the C API (the version script), whether built by `swift build -c release --product ferry`
/// or by CMake (scripts/build-lib.sh passes the same flags).
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path
let libraryLinkerFlags: [LinkerSetting] = [
    .unsafeFlags(["-static-stdlib", "-Xlinker", "-soname", "-Xlinker", "libferry.so",
                  "-Xlinker", "--version-script=\(root)/scripts/ferry.map"]),
]

/// The client library, libferry.so, is the product "ferry": FerryC's exports over FerryClient,
/// FerryStore and FerryCore. FerryCore is pure Swift and will be shared with the server.
/// Dynamic exclusivity checks cost about a tenth of the bulk-insert path (measured with
/// callgrind); the static checks still run. Release builds of the library turn the dynamic
/// ones off; debug builds and tests keep them.
let fastExclusivity: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "Ferry",
    products: [
        .library(name: "ferry", type: .dynamic, targets: ["FerryC"]),
        .library(name: "FerryCore", targets: ["FerryCore"]),
        .library(name: "FerryStore", targets: ["FerryStore"]),
        .executable(name: "ferry-server", targets: ["ferry-server"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CFerry", path: "include"),
        /// TLS for wss:// and https://, and SHA-1 for the WebSocket handshake.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .target(name: "FerryCore", swiftSettings: fastExclusivity),
        /// The SQLite wrapper the client's store and the server's embedded store both use.
        .target(name: "FerrySQLite", dependencies: ["FerryCore", "CSQLite"], swiftSettings: fastExclusivity),
        /// Encryption at rest: an SQLite VFS that seals every page with AES-256-GCM (OpenSSL).
        /// C, because it is a table of callbacks SQLite calls per page (docs/encryption.md).
        .target(name: "CFerryCipher", dependencies: ["CSQLite", "COpenSSL"],
                linkerSettings: [.linkedLibrary("crypto"), .linkedLibrary("sqlite3")]),
        .target(name: "FerryStore", dependencies: ["FerryCore", "FerrySQLite", "CSQLite", "CFerryCipher"], swiftSettings: fastExclusivity),
        .target(name: "FerryClient", dependencies: ["FerryCore", "FerrySQLite", "FerryStore", "CLibUV", "COpenSSL"]),
        .target(
            name: "FerryC",
            dependencies: ["CFerry", "FerryCore", "FerryStore", "FerryClient"],
            swiftSettings: [.enableExperimentalFeature("CImplementation")] + fastExclusivity,
            linkerSettings: libraryLinkerFlags
        ),
        /// Reads App Services style app directories for the server (Foundation is fine here:
        /// this never goes into libferry.so).
        .target(name: "FerryAppConfig", dependencies: ["FerryCore"]),
        /// The server's authentication: password hashing, access and refresh tokens, custom
        /// JWT verification, the user directory. Server side only.
        .target(name: "FerryAuth", dependencies: [
            "FerryCore", "FerryAppConfig",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "CryptoExtras", package: "swift-crypto"),
            .product(name: "JWTKit", package: "jwt-kit"),
        ]),
        /// The server's storage seam: the backend-neutral protocols (sync store, change feed) and
        /// the records they carry. Server side only.
        .target(name: "FerrySyncStorage", dependencies: ["FerryCore"]),
        /// The embedded store: one SQLite file per kind of state in the data directory.
        .target(name: "FerrySQLiteStorage", dependencies: ["FerryCore", "FerrySQLite", "FerrySyncStorage", "FerryAuth"]),
        /// The production store: PostgreSQL through postgres-nio, shared by several nodes.
        .target(name: "FerryPostgresStorage", dependencies: [
            "FerryCore", "FerrySyncStorage", "FerryAuth",
            .product(name: "PostgresNIO", package: "postgres-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        /// The server as a library, so tests run a real server in-process on a port the OS picks.
        .target(name: "FerryServer", dependencies: [
            "FerryCore", "FerryAppConfig", "FerryAuth", "FerrySyncStorage", "FerrySQLiteStorage", "FerryPostgresStorage",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            .product(name: "HummingbirdTLS", package: "hummingbird"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            // Triggers' webhook signatures (HMAC-SHA256).
            .product(name: "Crypto", package: "swift-crypto"),
            // Triggers' webhooks (a client that pools connections and speaks TLS).
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
        ], resources: [
            // The admin console's files, compiled into the binary (`PackageResources`): a copied
            // `ferry-server` keeps its console, and no bundle sits next to it.
            .embedInCode("Admin/Console/index.html"),
            .embedInCode("Admin/Console/console.css"),
            .embedInCode("Admin/Console/console.js"),
            .embedInCode("Admin/Console/favicon.svg"),
        ]),
        .executableTarget(name: "ferry-server", dependencies: [
            "FerryServer", "FerryAuth", "FerrySyncStorage", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        /// Helpers the test targets share (not shipped): child processes started without
        /// Foundation's `Process`, deadlines (`within`, `poll`), a webhook receiver for the
        /// trigger tests, the seeded generator of the randomized tests (`SplitMix64`).
        .target(name: "FerryTestSupport", dependencies: ["FerryCore", .product(name: "Hummingbird", package: "hummingbird")], path: "Tests/Support"),
        .testTarget(name: "FerryCoreTests", dependencies: ["FerryCore", "FerryTestSupport"]),
        .testTarget(name: "FerryAppConfigTests", dependencies: ["FerryAppConfig"]),
        .testTarget(name: "FerryServerTests", dependencies: [
            "FerryServer", "FerryTestSupport", .product(name: "HummingbirdTesting", package: "hummingbird"),
        ]),
        .testTarget(name: "FerryAuthTests", dependencies: [
            "FerryAuth", "FerryTestSupport", .product(name: "JWTKit", package: "jwt-kit"), .product(name: "CryptoExtras", package: "swift-crypto"),
        ]),
        .testTarget(name: "FerryStoreTests", dependencies: ["FerryStore", "FerrySQLite", "FerryClient", "FerryTestSupport"]),
        /// One suite run against every storage backend (PostgreSQL when FERRY_TEST_POSTGRES_URL
        /// names a database the tests may empty).
        .testTarget(name: "FerryStorageConformanceTests", dependencies: [
            "FerryCore", "FerryTestSupport", "FerryAuth", "FerrySyncStorage", "FerrySQLiteStorage", "FerryPostgresStorage",
            .product(name: "PostgresNIO", package: "postgres-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        /// The deterministic simulation: real client stores and the server's merge, a simulated
        /// network and clock, one seed per run (issue 25).
        .testTarget(name: "FerrySimulationTests", dependencies: [
            "FerryCore", "FerryStore", "FerryClient", "FerryServer", "FerryAppConfig", "FerrySyncStorage",
        ]),
        /// The client's network stack and sync engine against a real in-process ferry-server.
        .testTarget(name: "FerryClientTests", dependencies: [
            "FerryClient", "FerryServer", "FerrySQLite", "FerryPostgresStorage", "FerryTestSupport",
            .product(name: "PostgresNIO", package: "postgres-nio"),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
    ]
)
