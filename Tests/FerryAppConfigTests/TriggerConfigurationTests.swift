import Foundation
import Testing
@testable import FerryAppConfig

/// `triggers/<name>.json`: what is read, and every refusal naming the file and the problem.
@Suite("App Services app directories: triggers")
struct TriggerConfigurationTests {
    static func withTrigger(_ name: String, _ contents: String) throws -> String {
        let copy = NSTemporaryDirectory() + "ferry-app-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.copyItem(atPath: AppDirectoryTests.example, toPath: copy)
        try FileManager.default.createDirectory(atPath: copy + "/triggers", withIntermediateDirectories: true)
        try contents.write(toFile: copy + "/triggers/\(name).json", atomically: true, encoding: .utf8)
        return copy
    }

    @Test func readsATriggerInTheExportsShape() throws {
        let dir = try Self.withTrigger("items", """
            {"name": "items", "type": "DATABASE", "disabled": false, "max_failures": 4,
             "config": {"collection": "Item", "operation_types": ["INSERT", "REPLACE", "DELETE"], "match": "complexity > 3"},
             "webhook": {"url": "https://backend.example/hook", "secret_name": "S"}}
            """)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let t = try #require(try AppDirectory.load(dir).triggers.first)
        #expect(t == TriggerConfiguration(name: "items", className: "Item", operations: [.insert, .update, .delete], match: "complexity > 3",
                                          url: "https://backend.example/hook", secretName: "S", maxFailures: 4))
        #expect(try AppDirectory.load(AppDirectoryTests.example).triggers.isEmpty)
    }

    /// A `triggers` that is not a readable folder stops the load: a server must not start
    /// without the triggers its directory declares.
    @Test func aTriggersFileThatIsNotAFolderIsAnError() throws {
        let copy = NSTemporaryDirectory() + "ferry-app-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.copyItem(atPath: AppDirectoryTests.example, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try "{}".write(toFile: copy + "/triggers", atomically: true, encoding: .utf8)
        #expect(throws: AppConfigurationError.self) { _ = try AppDirectory.load(copy) }
    }

    @Test(arguments: [
        (#"{"name": "other", "config": {"collection": "Item", "operation_types": ["INSERT"]}, "webhook": {"url": "https://x/h", "secret_name": "S"}}"#, "file's name"),
        (#"{"name": "items", "type": "SCHEDULED", "config": {"collection": "Item", "operation_types": ["INSERT"]}, "webhook": {"url": "https://x/h", "secret_name": "S"}}"#, "DATABASE"),
        (#"{"name": "items", "config": {"collection": "Item", "operation_types": ["UPSERT"]}, "webhook": {"url": "https://x/h", "secret_name": "S"}}"#, "unknown operation type 'UPSERT'"),
        (#"{"name": "items", "config": {"collection": "Item", "operation_types": []}, "webhook": {"url": "https://x/h", "secret_name": "S"}}"#, "operation_types"),
        (#"{"name": "items", "config": {"collection": "Nope", "operation_types": ["INSERT"]}, "webhook": {"url": "https://x/h", "secret_name": "S"}}"#, "no class 'Nope'"),
        (#"{"name": "items", "config": {"collection": "Item", "operation_types": ["INSERT"], "match": "complexity >"}, "webhook": {"url": "https://x/h", "secret_name": "S"}}"#, "config.match"),
        (#"{"name": "items", "config": {"collection": "Item", "operation_types": ["INSERT"], "match": {"fullDocument.a": 1}}, "webhook": {"url": "https://x/h", "secret_name": "S"}}"#, "query in Ferry's query language"),
        (#"{"name": "items", "config": {"collection": "Item", "operation_types": ["INSERT"]}, "webhook": {"url": "http://backend.example/h", "secret_name": "S"}}"#, "https://"),
        (#"{"name": "items", "config": {"collection": "Item", "operation_types": ["INSERT"]}, "webhook": {"url": "ftp://x/h", "secret_name": "S"}}"#, "https://"),
        (#"{"name": "items", "config": {"collection": "Item", "operation_types": ["INSERT"]}, "webhook": {"url": "https://x/h"}}"#, "secret_name"),
        (#"{"name": "items", "max_failures": 0, "config": {"collection": "Item", "operation_types": ["INSERT"]}, "webhook": {"url": "https://x/h", "secret_name": "S"}}"#, "max_failures"),
    ])
    func aBadTriggerNamesTheFileAndTheProblem(contents: String, fragment: String) throws {
        let dir = try Self.withTrigger("items", contents)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            _ = try AppDirectory.load(dir)
            Issue.record("accepted \(contents)")
        } catch let e as AppConfigurationError {
            #expect(e.file == "triggers/items.json")
            #expect(e.description.contains(fragment), "message: \(e.description)")
        }
    }
}
