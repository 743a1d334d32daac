import Foundation
import Testing
@testable import FerryCore

/// `JSONText.quote` (rewritten over UTF-8 bytes for issue 23): what it writes is what a JSON
/// parser reads back, for every kind of character.
@Suite("Core: JSON string literals")
struct JSONTextTests {
    @Test func escapesExactlyQuotesBackslashesAndControlCharacters() {
        #expect(JSONText.quote("plain") == "\"plain\"")
        #expect(JSONText.quote("") == "\"\"")
        #expect(JSONText.quote("a\"b\\c") == "\"a\\\"b\\\\c\"")
        #expect(JSONText.quote("l1\nl2\r\tx") == "\"l1\\nl2\\r\\tx\"")
        #expect(JSONText.quote("\u{0}\u{1f}\u{7f}") == "\"\\u0000\\u001f\u{7f}\"")
        #expect(JSONText.quote("é 漢字 🙂") == "\"é 漢字 🙂\"")
    }

    /// The oracle: Foundation's JSON parser reads every quoted string back as it was. (Not
    /// U+FEFF: that parser drops it wherever it stands.)
    @Test func aJSONParserReadsBackWhatWasQuoted() throws {
        var rng = SystemRandomNumberGenerator()
        let pool: [Unicode.Scalar] = (0..<0x80).compactMap(Unicode.Scalar.init) + ["é", "ß", "漢", "🙂", "\u{2028}"]
        for _ in 0..<500 {
            let s = String(String.UnicodeScalarView((0..<Int.random(in: 0..<40, using: &rng)).map { _ in pool.randomElement(using: &rng)! }))
            let quoted = JSONText.quote(s)
            let back = try JSONSerialization.jsonObject(with: Data("[\(quoted)]".utf8)) as? [String]
            #expect(back == [s], "\(quoted)")
        }
    }
}
