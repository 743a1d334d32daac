@testable import FerryClient
import FerryCore
import FerrySQLite
@testable import FerryStore
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Every client-reset mode against every server trigger (issue 5, point 8), with recovery
/// enabled and disabled in the server's sync configuration: one device with a synced object
/// and an unsynced one, and what each combination must do with the unsynced one. Serialized:
/// eighteen servers at once on two cores (more under the sanitizers) only test the machine.
@Suite("Client reset: every mode against every trigger", .serialized)
struct ClientResetMatrixTests {
    enum Trigger: String, Sendable, CaseIterable {
        /// An admin terminates sync and enables it again: the server forgets every client file.
        case terminateAndEnable
        /// The device's client file was last seen longer ago than client_max_offline_days.
        case offlineTooLong
    }

    /// What the reset does with the device's unsynced object.
    enum Outcome: Sendable { case recovered, discarded, handedToTheHost }

    struct Combination: Sendable, CustomTestStringConvertible {
        let trigger: Trigger
        let recoveryDisabled: Bool
        let mode: ClientResetMode
        var testDescription: String { "\(trigger.rawValue), recovery \(recoveryDisabled ? "disabled" : "enabled"), \(mode)" }

        /// The rules of SPEC F-RESETMODES: the trigger does not matter, the server's recovery
        /// setting and the mode do.
        var expected: Outcome {
            switch (mode, recoveryDisabled) {
            case (.manual, _): return .handedToTheHost
            case (.discardUnsyncedChanges, _): return .discarded
            case (.recoverOrDiscardUnsyncedChanges, false): return .recovered
            case (.recoverOrDiscardUnsyncedChanges, true): return .discarded
            case (.recoverUnsyncedChanges, false): return .recovered
            case (.recoverUnsyncedChanges, true): return .handedToTheHost
            }
        }

        static let all: [Combination] = Trigger.allCases.flatMap { t in
            [false, true].flatMap { disabled in
                [ClientResetMode.recoverUnsyncedChanges, .recoverOrDiscardUnsyncedChanges, .discardUnsyncedChanges, .manual].map {
                    Combination(trigger: t, recoveryDisabled: disabled, mode: $0)
                }
            }
        }
    }

    /// A copy of the seeds' app with recovery disabled in its sync configuration.
    static func appWithoutRecovery() throws -> String {
        let dir = SyncTestServer.temporaryDirectory("no-recovery-app")
        _ = system("cp -r '\(SyncTestServer.appDirectory)/.' '\(dir)/'")
        let path = dir + "/sync/config.json"
        let config = try String(contentsOfFile: path, encoding: .utf8)
        let changed = config.replacingOccurrences(of: "\"is_recovery_mode_disabled\": false", with: "\"is_recovery_mode_disabled\": true")
        #expect(changed != config, "the example app's sync config no longer says is_recovery_mode_disabled false")
        try changed.write(toFile: path, atomically: true, encoding: .utf8)
        return dir
    }

    @Test(arguments: Combination.all)
    func theModeDecidesWhatBecomesOfTheUnsyncedChanges(_ c: Combination) async throws {
        let data = SyncTestServer.temporaryDirectory("matrix-server")
        let app = c.recoveryDisabled ? try Self.appWithoutRecovery() : SyncTestServer.appDirectory
        try await SyncTestServer.withServer(appDirectory: app, dataDirectory: data, secrets: AdminAPI.secrets) { url in
            let device = try await SessionTestApp(url: url, subject: "matrix") { $0.reconnectDelayMinMs = 50; $0.reconnectDelayMaxMs = 200 }
            defer { device.app.close() }
            let errors = ErrorLog()
            device.app.errorHandler = { _, e in errors.add(e) }
            let s = try device.open("m.ferry", options: SyncOpenOptions(clientResetMode: c.mode))
            defer { s.close() }
            try await s.subscribe("ownerId == '\(device.user.id)'")
            let synced = ObjectId.generate(), unsynced = ObjectId.generate()
            try s.createItem(synced, owner: device.user.id, name: "synced")
            try await s.waitUpload()
            s.suspend()
            try s.createItem(unsynced, owner: device.user.id, name: "unsynced")

            switch c.trigger {
            case .terminateAndEnable:
                try await ClientResetSyncTests.terminateAndEnable(url)
            case .offlineTooLong:
                let ident = try s.database.syncMetadata().clientFileIdent
                let store = try SQLiteConnection(creatingAt: data + "/sync.sqlite", description: "the test's view of the server store")
                try store.exec("PRAGMA busy_timeout=10000; UPDATE client_files SET last_seen = last_seen - 31 * 86400 WHERE ident = \(ident)")
                store.close()
            }
            s.resume()
            let (error, report) = await ClientResetSyncTests.resetReport(errors)
            let e = try #require(error, "no client-reset error reached the handler")
            #expect(e.code == 208)
            #expect(e.action == (c.recoveryDisabled ? .clientResetNoRecovery : .clientReset))
            let unsyncedThere = try s.database.object(classIndex: 0, key: .objectId(unsynced)) != nil
            switch c.expected {
            case .recovered:
                #expect(!e.isFatal)
                #expect(report?.recovered == true)
                #expect(report?.entries.map(\.reason) == ["created on this device and not yet synced"])
                #expect(unsyncedThere)
                try await s.waitUpload()
                #expect(s.state == .active)
            case .discarded:
                #expect(!e.isFatal)
                #expect(report?.recovered == false)
                #expect(report?.entries.map(\.outcome) == [.discarded])
                #expect(!unsyncedThere)
                #expect(try s.database.object(classIndex: 0, key: .objectId(synced)) != nil)
                #expect(s.state == .active)
            case .handedToTheHost:
                #expect(e.isFatal)
                #expect(report == nil)
                #expect(e.clientResetToken == s.path)
                #expect(e.clientResetBackupPath != nil)
                #expect(unsyncedThere)
                #expect(s.state == .inactive)
            }
        }
    }

    /// SPEC F-RESETMODES, no loops: after a failed recovery the next recoverOrDiscard attempt
    /// discards, and a reset that failed three times in a row is handed to the host instead of
    /// being tried again.
    @Test(arguments: [(UInt64(1), Outcome.discarded), (UInt64(3), Outcome.handedToTheHost)])
    func earlierFailuresMakeTheNextAttemptDiscardOrStop(_ failures: UInt64, _ expected: Outcome) async throws {
        try await SyncTestServer.withServer(secrets: AdminAPI.secrets) { url in
            let device = try await SessionTestApp(url: url, subject: "reset-failures") { $0.reconnectDelayMinMs = 50; $0.reconnectDelayMaxMs = 200 }
            defer { device.app.close() }
            let errors = ErrorLog()
            device.app.errorHandler = { _, e in errors.add(e) }
            let s = try device.open("f.ferry", options: SyncOpenOptions(clientResetMode: .recoverOrDiscardUnsyncedChanges))
            defer { s.close() }
            try await s.subscribe("ownerId == '\(device.user.id)'")
            s.suspend()
            let unsynced = ObjectId.generate()
            try s.createItem(unsynced, owner: device.user.id, name: "unsynced")
            // The failures of earlier attempts, as the file counts them.
            try s.database.setSyncValue(SyncSession.resetFailuresKey, (0..<8).map { UInt8(truncatingIfNeeded: failures >> (8 * UInt64($0))) })
            try await ClientResetSyncTests.terminateAndEnable(url)
            s.resume()
            let (error, report) = await ClientResetSyncTests.resetReport(errors)
            let e = try #require(error)
            switch expected {
            case .discarded:
                #expect(!e.isFatal)
                #expect(report?.entries.map(\.reason) == ["an earlier recovery of these changes failed"])
                #expect(try s.database.object(classIndex: 0, key: .objectId(unsynced)) == nil)
                // A reset that worked starts the count over.
                #expect(try s.database.syncValue(SyncSession.resetFailuresKey) == nil)
            default:
                #expect(e.isFatal)
                #expect(e.message.contains("failed 3 times in a row"), "\(e.message)")
                #expect(e.clientResetToken != nil)
                #expect(try s.database.object(classIndex: 0, key: .objectId(unsynced)) != nil)
            }
        }
    }
}
