// Fuzz target: HTTPResponseParser, which reads every HTTP response a server (or anything
// pretending to be one) sends the client. Checks that no input traps, and that feeding the same
// bytes in pieces (split points taken from the input) gives the same response as feeding them whole.
// fuzz-sources: Sources/FerryClient/Net/HTTPResponseParser.swift
public func fuzzHTTP(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let split = Int(data[0])
    let method = split & 0x80 != 0 ? "HEAD" : "GET"
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let whole = parse([bytes], method: method)
    var pieces: [[UInt8]] = []
    var start = 0
    let step = max(1, split & 0x3F)
    while start < bytes.count {
        let end = min(bytes.count, start + step)
        pieces.append(Array(bytes[start..<end]))
        start = end
    }
    let split2 = parse(pieces, method: method)
    precondition(whole == split2, "splitting the input changed the parse")
    return 0
}

/// A normalised outcome: the head, the whole body, whether it ended, whether it failed, leftover.
struct Outcome: Equatable {
    var head: HTTPResponseParser.Head?
    var body: [UInt8] = []
    var ended = false
    var failed = false
    var leftover: [UInt8] = []
    var endedAtEOF = false
}

func parse(_ pieces: [[UInt8]], method: String) -> Outcome {
    var parser = HTTPResponseParser(requestMethod: method, maxHeadBytes: 1 << 12)
    var outcome = Outcome()
    func apply(_ events: [HTTPResponseParser.Event]) {
        for event in events {
            switch event {
            case .head(let head):
                precondition(outcome.head == nil, "two heads")
                outcome.head = head
            case .body(let bytes):
                precondition(outcome.head != nil && !outcome.ended, "body outside a response")
                outcome.body += bytes
            case .end:
                precondition(outcome.head != nil && !outcome.ended, "end outside a response")
                outcome.ended = true
            }
        }
    }
    do {
        for piece in pieces { apply(try parser.feed(piece)) }
        outcome.leftover = parser.leftover
        if !outcome.ended {
            apply(try parser.finishAtEndOfStream())
            outcome.endedAtEOF = true
        }
    } catch {
        // A failure may surface at a different piece, but it must surface either way.
        return Outcome(failed: true)
    }
    return outcome
}
