import FerryCore
import Foundation
import Testing

/// The protocol's error codes are named once (`ProtocolError.Code`) and documented once
/// (docs/protocol.md, "Errors"): the two lists are the same, and no name is used twice.
@Suite("Core: protocol error codes")
struct ProtocolErrorTests {
    @Test func everyCodeIsDocumentedAndEveryDocumentedCodeIsNamed() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/protocol.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let section = try #require(text.components(separatedBy: "## Errors").dropFirst().first?.components(separatedBy: "\n## ").first)
        let documented = section.split(separator: "\n").compactMap { line -> Int32? in
            let cells = line.split(separator: "|", omittingEmptySubsequences: true)
            return cells.first.flatMap { Int32($0.trimmingCharacters(in: .whitespaces)) }
        }
        #expect(Set(documented) == Set(ProtocolError.allCodes), "docs/protocol.md's table and ProtocolError.Code differ")
        #expect(documented.count == Set(documented).count, "a code is documented twice")
        #expect(ProtocolError.allCodes.count == Set(ProtocolError.allCodes).count, "two names share a code")
        #expect(!ProtocolError.allCodes.contains(ProtocolError.Code.local))
    }
}
