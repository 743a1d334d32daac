import Testing
@testable import FerryCore

@Suite("Schema validation")
struct SchemaTests {
    @Test(arguments: [
        ([Property(name: "x", type: .int)], "no primary key"),
        ([Property(name: "_id", type: .double, isPrimaryKey: true)], "must be a required objectId"),
        ([Property(name: "_id", type: .int, isPrimaryKey: true), Property(name: "_id", type: .int)], "two properties"),
        ([Property(name: "id", type: .int, isPrimaryKey: true)], "must be named '_id'"),
        ([Property(name: "_id", type: .int, isPrimaryKey: true), Property(name: "__x", type: .int)], "reserves"),
        ([Property(name: "_id", type: .int, isPrimaryKey: true), Property(name: "l", type: .int, isOptional: true, isList: true)], "cannot be optional"),
        ([Property(name: "_id", type: .int, isPrimaryKey: true), Property(name: "l", type: .int, isIndexed: true, isList: true)], "cannot be indexed"),
        ([Property(name: "_id", type: .int, isPrimaryKey: true), Property(name: "k", type: .link)], "no target"),
        ([Property(name: "_id", type: .int, isPrimaryKey: true), Property(name: "", type: .int)], "1 to 63 bytes"),
    ])
    func invalidClassesAreRefused(properties: [Property], fragment: String) {
        do {
            _ = try ObjectSchema(name: "C", properties: properties)
            Issue.record("should be refused")
        } catch let e as FerryError {
            #expect(e.code == .invalidSchema)
            #expect(e.message.contains(fragment), "message was: \(e.message)")
        } catch { Issue.record("\(error)") }
    }

    @Test func linksResolveToTheTargetKeyType() throws {
        let person = try ObjectSchema(name: "Person", properties: [Property(name: "_id", type: .string, isPrimaryKey: true)])
        let dog = try ObjectSchema(name: "Dog", properties: [Property(name: "_id", type: .int, isPrimaryKey: true),
                                                              Property(name: "owner", type: .link, linkTarget: "Person")])
        let schema = try Schema([person, dog])
        #expect(schema.classes[1].properties[1].valueType == .string)
        #expect(throws: FerryError.self) { try Schema([dog]) }
        #expect(throws: FerryError.self) { try Schema([person, person]) }
    }
}
