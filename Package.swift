// swift-tools-version:6.0
import PackageDescription

/// The client library, libferry.so, is the product "ferry": FerryC's exports over FerryClient,
/// FerryStore and FerryCore. FerryCore is pure Swift and will be shared with the server.
let package = Package(
    name: "Ferry",
    products: [
        .library(name: "ferry", type: .dynamic, targets: ["FerryC"]),
        .library(name: "FerryCore", targets: ["FerryCore"]),
        .library(name: "FerryStore", targets: ["FerryStore"]),
    ],
    targets: [
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CFerry", path: "include"),
        .target(name: "FerryCore"),
        .target(name: "FerryStore", dependencies: ["FerryCore", "CSQLite"]),
        .target(name: "FerryClient", dependencies: ["FerryCore", "FerryStore", "CLibUV"]),
        .target(
            name: "FerryC",
            dependencies: ["CFerry", "FerryCore", "FerryStore", "FerryClient"],
            swiftSettings: [.enableExperimentalFeature("CImplementation")]
        ),
        .testTarget(name: "FerryCoreTests", dependencies: ["FerryCore"]),
        .testTarget(name: "FerryStoreTests", dependencies: ["FerryStore", "FerryClient"]),
    ]
)
