/// An incremental HTTP/1.1 response parser: feed it bytes as they arrive, get head, body and end
/// events back. It does no I/O and imports nothing, so the fuzz build compiles this one file
/// alone (`fuzz/targets/http.swift`). Every length and count read from the network goes through
/// a limit or checked arithmetic, so hostile bytes end in a `ParseError`, never in a trap.
///
/// Bodies may be delimited by Content-Length, by chunked transfer coding, or by the end of the
/// connection (call `finishAtEndOfStream()` then). Interim 1xx responses are skipped, except
/// 101 Switching Protocols, which ends the response at its head: whatever bytes follow belong
/// to the new protocol and are kept in `leftover`.
public struct HTTPResponseParser: Sendable {
    /// The status line and header fields of a response.
    public struct Head: Sendable, Equatable {
        public var status: Int
        public var headers: [(String, String)]

        public init(status: Int, headers: [(String, String)]) {
            self.status = status
            self.headers = headers
        }

        /// The first value of a header field, by case-insensitive name.
        public func header(_ name: String) -> String? {
            let wanted = name.lowercased()
            return headers.first { $0.0.lowercased() == wanted }?.1
        }

        public static func == (a: Head, b: Head) -> Bool {
            a.status == b.status && a.headers.count == b.headers.count
                && zip(a.headers, b.headers).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        }
    }

    public enum Event: Sendable, Equatable {
        case head(Head)
        /// Some bytes of the body, in order; a body may come in any number of pieces.
        case body([UInt8])
        /// The response is complete.
        case end
    }

    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public let message: String
        public init(_ message: String) { self.message = message }
        public var description: String { message }
    }

    private enum State: Sendable, Equatable {
        case statusLine, headerLines
        case fixedBody(remaining: Int)
        case chunkSize, chunkData(remaining: Int), chunkDataEnd, trailers
        case untilEndOfStream
        case done
    }

    /// The most bytes a head (status line and headers, or the trailers) may take.
    public let maxHeadBytes: Int
    /// The longest chunk-size line (with its extensions) accepted.
    static let maxChunkLineBytes = 4096

    private let isHeadRequest: Bool
    private var state = State.statusLine
    private var buffer: [UInt8] = []
    private var position = 0
    /// Where the search for the next line feed resumes, so a slowly arriving line is not rescanned.
    private var scanned = 0
    private var headBytes = 0
    private var status = 0
    private var headers: [(String, String)] = []
    private var failure: ParseError?

    /// `requestMethod` matters only for HEAD, whose response has no body whatever its headers say.
    public init(requestMethod: String = "GET", maxHeadBytes: Int = 64 << 10) {
        isHeadRequest = requestMethod.uppercased() == "HEAD"
        self.maxHeadBytes = max(maxHeadBytes, 64)
    }

    /// Whether the `.end` event was produced.
    public var isComplete: Bool { state == .done }

    /// Bytes received after the end of the response (after a 101, the new protocol's first bytes).
    public var leftover: [UInt8] { isComplete ? Array(buffer[position...]) : [] }

    /// Parses `bytes` and returns the events they complete. After an error every call throws it
    /// again; after the end, further bytes only add to `leftover`.
    public mutating func feed(_ bytes: [UInt8]) throws(ParseError) -> [Event] {
        if let failure { throw failure }
        buffer.append(contentsOf: bytes)
        if state == .done { return [] }
        var events: [Event] = []
        do {
            try parse(into: &events)
        } catch {
            failure = error
            throw error
        }
        compact()
        return events
    }

    /// The connection ended: completes a body delimited by the end of the stream, and is an error
    /// for any other unfinished response.
    public mutating func finishAtEndOfStream() throws(ParseError) -> [Event] {
        if let failure { throw failure }
        switch state {
        case .done:
            return []
        case .untilEndOfStream:
            state = .done
            return [.end]
        default:
            let error = ParseError("the connection ended before the response was complete")
            failure = error
            throw error
        }
    }

    private mutating func compact() {
        guard position > 0, state != .done else { return }
        buffer.removeSubrange(0..<position)
        scanned -= position
        position = 0
    }

    private mutating func parse(into events: inout [Event]) throws(ParseError) {
        while true {
            switch state {
            case .statusLine:
                guard let line = try nextLine(limit: maxHeadBytes - headBytes, what: "response head") else { return }
                if line.isEmpty && headBytes <= 2 { headBytes = 0; continue } // a stray CRLF before a status line
                status = try Self.parseStatusLine(line)
                state = .headerLines
            case .headerLines:
                guard let line = try nextLine(limit: maxHeadBytes - headBytes, what: "response head") else { return }
                if line.isEmpty {
                    try headComplete(into: &events)
                } else {
                    headers.append(try Self.parseHeaderLine(line))
                }
            case .fixedBody(let remaining):
                let taken = takeBody(upTo: remaining, into: &events)
                if taken == remaining {
                    finish(into: &events)
                } else {
                    state = .fixedBody(remaining: remaining - taken)
                    return
                }
            case .chunkSize:
                guard let line = try nextLine(limit: Self.maxChunkLineBytes, what: "chunk-size line") else { return }
                let size = try Self.parseChunkSize(line)
                state = size == 0 ? .trailers : .chunkData(remaining: size)
                headBytes = 0
            case .chunkData(let remaining):
                let taken = takeBody(upTo: remaining, into: &events)
                if taken == remaining {
                    state = .chunkDataEnd
                } else {
                    state = .chunkData(remaining: remaining - taken)
                    return
                }
            case .chunkDataEnd:
                guard let line = try nextLine(limit: Self.maxChunkLineBytes, what: "chunk end") else { return }
                guard line.isEmpty else { throw ParseError("chunk data is not followed by CRLF") }
                state = .chunkSize
            case .trailers:
                guard let line = try nextLine(limit: maxHeadBytes - headBytes, what: "trailer section") else { return }
                if line.isEmpty {
                    finish(into: &events)
                } else {
                    _ = try Self.parseHeaderLine(line) // trailers are checked, then dropped
                }
            case .untilEndOfStream:
                let available = buffer.count - position
                if available > 0 { _ = takeBody(upTo: available, into: &events) }
                return
            case .done:
                return
            }
        }
    }

    private mutating func finish(into events: inout [Event]) {
        state = .done
        events.append(.end)
    }

    /// Emits up to `limit` buffered body bytes and returns how many.
    private mutating func takeBody(upTo limit: Int, into events: inout [Event]) -> Int {
        let count = min(limit, buffer.count - position)
        guard count > 0 else { return 0 }
        events.append(.body(Array(buffer[position..<(position + count)])))
        position += count
        return count
    }

    /// The next line without its line ending (LF or CRLF), or nil until one has arrived. A line
    /// longer than `limit` is an error rather than a reason to buffer without end.
    private mutating func nextLine(limit: Int, what: String) throws(ParseError) -> [UInt8]? {
        let start = max(position, scanned)
        guard let newline = buffer[start...].firstIndex(of: 0x0A) else {
            scanned = buffer.count
            if buffer.count - position > limit { throw ParseError("\(what) too long") }
            return nil
        }
        let length = newline + 1 - position
        if length > limit { throw ParseError("\(what) too long") }
        var end = newline
        if end > position && buffer[end - 1] == 0x0D { end -= 1 }
        let line = Array(buffer[position..<end])
        position = newline + 1
        scanned = position
        headBytes += length
        return line
    }

    private mutating func headComplete(into events: inout [Event]) throws(ParseError) {
        let head = Head(status: status, headers: headers)
        headers = []
        headBytes = 0
        if status >= 100 && status < 200 && status != 101 {
            state = .statusLine // interim response (100 Continue, 103 Early Hints): the real one follows
            return
        }
        events.append(.head(head))
        if status == 101 || isHeadRequest || status == 204 || status == 304 {
            finish(into: &events)
            return
        }
        if let codings = Self.values(of: "transfer-encoding", in: head.headers) {
            // Chunked must be the last coding; any other framing is read until the connection ends.
            let last = codings.last?.lowercased()
            state = last == "chunked" ? .chunkSize : .untilEndOfStream
            return
        }
        if let lengths = Self.values(of: "content-length", in: head.headers) {
            var length: Int?
            for text in lengths {
                let value = try Self.parseContentLength(text)
                if let length, length != value { throw ParseError("conflicting Content-Length values") }
                length = value
            }
            if let length, length > 0 {
                state = .fixedBody(remaining: length)
            } else {
                finish(into: &events)
            }
            return
        }
        state = .untilEndOfStream
    }

    /// All comma-separated values of every field with this (lowercase) name, or nil if absent.
    private static func values(of name: String, in headers: [(String, String)]) -> [String]? {
        var found: [String]?
        for (key, value) in headers where key.lowercased() == name {
            let parts = value.split(separator: ",").map { trim(Array($0.utf8)) }.filter { !$0.isEmpty }
            found = (found ?? []) + parts.map { String(decoding: $0, as: UTF8.self) }
        }
        return found
    }

    private static func parseStatusLine(_ line: [UInt8]) throws(ParseError) -> Int {
        // HTTP/1.x SP 3DIGIT [SP reason]
        let prefix: [UInt8] = Array("HTTP/1.".utf8)
        guard line.count >= 12, Array(line[0..<7]) == prefix, isDigit(line[7]), line[8] == 0x20,
              isDigit(line[9]), isDigit(line[10]), isDigit(line[11]),
              line.count == 12 || line[12] == 0x20
        else { throw ParseError("malformed status line") }
        let status = Int(line[9] - 0x30) * 100 + Int(line[10] - 0x30) * 10 + Int(line[11] - 0x30)
        guard status >= 100 else { throw ParseError("status code \(status) out of range") }
        return status
    }

    private static func parseHeaderLine(_ line: [UInt8]) throws(ParseError) -> (String, String) {
        guard let colon = line.firstIndex(of: 0x3A), colon > 0 else {
            throw ParseError(line.first == 0x20 || line.first == 0x09 ? "folded header lines are not supported" : "malformed header line")
        }
        let name = line[..<colon]
        guard name.allSatisfy(isTokenByte) else { throw ParseError("malformed header name") }
        let value = trim(Array(line[(colon + 1)...]))
        guard !value.contains(where: { $0 < 0x20 && $0 != 0x09 || $0 == 0x7F }) else {
            throw ParseError("control character in a header value")
        }
        return (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    private static func parseContentLength(_ text: String) throws(ParseError) -> Int {
        let digits = Array(text.utf8)
        // 18 decimal digits always fit in an Int, so no overflow check is needed below.
        guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy(isDigit) else {
            throw ParseError("invalid Content-Length")
        }
        return digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }

    private static func parseChunkSize(_ line: [UInt8]) throws(ParseError) -> Int {
        var value = 0
        var digits = 0
        var index = 0
        while index < line.count, let digit = hexValue(line[index]) {
            // 15 hex digits always fit in an Int, so no overflow check is needed below.
            digits += 1
            guard digits <= 15 else { throw ParseError("chunk size too large") }
            value = value << 4 | digit
            index += 1
        }
        guard digits > 0 else { throw ParseError("malformed chunk size") }
        let rest = trim(Array(line[index...]))
        guard rest.isEmpty || rest.first == 0x3B else { throw ParseError("malformed chunk size") } // ';' extensions
        return value
    }

    private static func trim(_ bytes: [UInt8]) -> [UInt8] {
        var slice = bytes[...]
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
        return Array(slice)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30...0x39: return Int(byte - 0x30)
        case 0x41...0x46: return Int(byte - 0x41 + 10)
        case 0x61...0x66: return Int(byte - 0x61 + 10)
        default: return nil
        }
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}
