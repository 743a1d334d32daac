import FerryClient
import FerryCore
import Testing

/// The pure pieces: URL parsing, the HTTP response parser and the WebSocket frame codec.
@Suite("Net: parsers")
struct NetParserTests {
    @Test func endpoints() throws {
        let a = try Endpoint(parsing: "wss://Sync.Example.com/api/sync?x=1#frag")
        #expect(a.scheme == "wss" && a.host == "sync.example.com" && a.port == 443 && a.isSecure)
        #expect(a.pathAndQuery == "/api/sync?x=1")
        let b = try Endpoint(parsing: "http://[::1]:8080")
        #expect(b.host == "::1" && b.port == 8080 && b.pathAndQuery == "/" && b.hostHeader == "[::1]:8080")
        let c = try Endpoint(parsing: "ws://h?q")
        #expect(c.pathAndQuery == "/?q" && c.port == 80 && !c.isSecure)
        for bad in ["", "example.com", "ftp://x/", "http://", "http://h:0/", "http://h:65536/", "http://h:x/",
                    "http://u@h/", "http://h /", "http://[::1/"] {
            #expect(throws: FerryError.self) { try Endpoint(parsing: bad) }
        }
    }

    func parseAll(_ text: String, method: String = "GET", split: Int = 1) throws -> (HTTPResponseParser.Head?, [UInt8], Bool) {
        var parser = HTTPResponseParser(requestMethod: method)
        let bytes = Array(text.utf8)
        var head: HTTPResponseParser.Head?
        var body: [UInt8] = []
        var ended = false
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + split)
            for event in try parser.feed(Array(bytes[start..<end])) {
                switch event {
                case .head(let h): head = h
                case .body(let b): body += b
                case .end: ended = true
                }
            }
            start = end
        }
        return (head, body, ended)
    }

    @Test func responsesInAnySplit() throws {
        for split in [1, 2, 7, 1000] {
            let (head, body, ended) = try parseAll("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b \r\n\r\nhello", split: split)
            #expect(head?.status == 200 && head?.header("x-a") == "b")
            #expect(body == Array("hello".utf8) && ended)
            let chunked = try parseAll("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n", split: split)
            #expect(chunked.1 == Array("hello0123456789".utf8) && chunked.2)
            let interim = try parseAll("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", split: split)
            #expect(interim.0?.status == 204 && interim.2)
        }
    }

    @Test func headResponseHasNoBody() throws {
        let (head, body, ended) = try parseAll("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", method: "HEAD")
        #expect(head?.status == 200 && body.isEmpty && ended)
    }

    @Test func bodyUntilTheConnectionEnds() throws {
        var parser = HTTPResponseParser()
        let events = try parser.feed(Array("HTTP/1.0 200 OK\r\n\r\nabc".utf8))
        #expect(events.count == 2)
        #expect(try parser.finishAtEndOfStream() == [.end])
    }

    @Test func switchingProtocolsKeepsTheRest() throws {
        var parser = HTTPResponseParser()
        let events = try parser.feed(Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n".utf8) + [0x82, 0x00])
        #expect(events.last == .end)
        #expect(parser.leftover == [0x82, 0x00])
    }

    @Test func malformedResponses() {
        for text in ["HTTP/2 200 OK\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
                     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                     "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n"] {
            #expect(throws: HTTPResponseParser.ParseError.self) { _ = try parseAll(text) }
        }
        var parser = HTTPResponseParser(maxHeadBytes: 100)
        #expect(throws: HTTPResponseParser.ParseError.self) {
            _ = try parser.feed(Array(("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 200)).utf8))
        }
        var unfinished = HTTPResponseParser()
        _ = try? unfinished.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".utf8))
        #expect(throws: HTTPResponseParser.ParseError.self) { _ = try unfinished.finishAtEndOfStream() }
    }

    @Test func framesRoundTripInAnySplit() throws {
        let message = pattern(70_000)
        var bytes = WebSocketFrameEncoder.message(.binary, payload: message, maxFrameSize: 16 << 10) { (1, 2, 3, 4) }
        bytes += WebSocketFrameEncoder.frame(.ping, payload: [9, 9], maskingKey: (5, 6, 7, 8))
        bytes += WebSocketFrameEncoder.frame(.close, payload: WebSocketFrameEncoder.closePayload(code: 1000, reason: Array("bye".utf8))[...],
                                             maskingKey: (0, 0, 0, 1))
        for split in [1, 3, 1000, bytes.count] {
            var decoder = WebSocketFrameDecoder(maxMessageSize: 1 << 20, expectsMaskedFrames: true)
            var events: [WebSocketFrameDecoder.Event] = []
            var start = 0
            while start < bytes.count {
                let end = min(bytes.count, start + split)
                events += try decoder.feed(Array(bytes[start..<end]))
                start = end
            }
            #expect(events == [.message(opcode: .binary, payload: message), .ping([9, 9]), .close(code: 1000, reason: Array("bye".utf8))])
        }
    }

    @Test func protocolErrors() {
        let cases: [([UInt8], UInt16)] = [
            ([0x82, 0x81, 0, 0, 0, 0, 1], 1002),  // masked frame from a server
            ([0xC2, 0x00], 1002),                 // reserved bit
            ([0x83, 0x00], 1002),                 // unknown opcode
            ([0x09, 0x00], 1002),                 // fragmented ping
            ([0x80, 0x00], 1002),                 // continuation of nothing
            ([0x02, 0x00, 0x82, 0x00], 1002),     // new message inside a fragmented one
            ([0x88, 0x01, 0x03], 1002),           // one-byte close body
            ([0x88, 0x02, 0x03, 0xED], 1002),     // close code 1005 may not be sent
            ([0x89, 0x7E, 0x00, 0x7E], 1002),     // control frame longer than 125
            ([0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0], 1002), // 64-bit length with the top bit
            ([0x82, 0x7F, 0, 0, 0, 1, 0, 0, 0, 0], 1009),    // declared 4 GiB: too big before any payload
        ]
        for (bytes, code) in cases {
            var decoder = WebSocketFrameDecoder(maxMessageSize: 1 << 20)
            #expect(throws: WebSocketFrameDecoder.ProtocolError.self) { _ = try decoder.feed(bytes) }
            do { _ = try decoder.feed([]) } catch { #expect(error.closeCode == code, "\(bytes)") }
        }
    }
}
