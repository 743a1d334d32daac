/// A token of the query language, with the byte offset where it starts (for error messages).
struct QueryToken: Equatable {
    enum Kind: Equatable {
        case identifier(String)      // property names, keywords, @count
        case string(String)
        case integer(Int64)
        case double(Double)
        case argument(Int)           // $0, $1, ...
        case timestamp(Int64, Int32) // T<seconds>:<nanoseconds>
        case value(FerryValue)       // oid(...) and uuid(...) literals
        case symbol(String)          // == != < <= > >= && || ! ( ) { } [ ] , .
        case end
    }
    let kind: Kind
    let offset: Int

    var text: String {
        switch kind {
        case .identifier(let s): return s
        case .string(let s): return "\"\(s)\""
        case .integer(let i): return String(i)
        case .double(let d): return String(d)
        case .argument(let n): return "$\(n)"
        case .timestamp(let s, let n): return "T\(s):\(n)"
        case .value(let v): return v.debugText
        case .symbol(let s): return s
        case .end: return "end of query"
        }
    }

    /// Whether this token is the given keyword (keywords are case-insensitive).
    func isKeyword(_ word: String) -> Bool {
        if case .identifier(let s) = kind { return s.uppercased() == word }
        return false
    }
}
