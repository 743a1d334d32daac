// Fuzz target: WebSocketFrameDecoder, which reads every frame the sync server sends the client.
// Checks that no input traps, that the split of the input into reads does not change the
// events, that a message never exceeds the limit, and that re-encoded events decode back.
// fuzz-sources: Sources/FerryClient/Net/WebSocketOpcode.swift Sources/FerryClient/Net/WebSocketFrameDecoder.swift Sources/FerryClient/Net/WebSocketFrameEncoder.swift
public func fuzzWebSocket(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let control = Int(data[0])
    let masked = control & 0x80 != 0
    let limit = 1 << 16
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let whole = decode([bytes], masked: masked, limit: limit)
    var pieces: [[UInt8]] = []
    var start = 0
    let step = max(1, control & 0x3F)
    while start < bytes.count {
        let end = min(bytes.count, start + step)
        pieces.append(Array(bytes[start..<end]))
        start = end
    }
    precondition(decode(pieces, masked: masked, limit: limit) == whole, "splitting the input changed the events")
    guard let events = whole.events else { return 0 }

    // Re-encode what was decoded (fragmenting data messages) and decode it again.
    var encoded: [UInt8] = []
    let key: (UInt8, UInt8, UInt8, UInt8)? = masked ? (0x12, 0x34, 0x56, 0x78) : nil
    for event in events {
        switch event {
        case .message(let opcode, let payload):
            precondition(payload.count <= limit, "message over the limit")
            encoded += WebSocketFrameEncoder.message(opcode, payload: payload, maxFrameSize: 1 + control % 300) { key }
        case .ping(let payload):
            encoded += WebSocketFrameEncoder.frame(.ping, payload: payload[...], maskingKey: key)
        case .pong(let payload):
            encoded += WebSocketFrameEncoder.frame(.pong, payload: payload[...], maskingKey: key)
        case .close(let code, let reason):
            let body = code.map { [UInt8($0 >> 8), UInt8($0 & 0xFF)] + reason } ?? []
            encoded += WebSocketFrameEncoder.frame(.close, payload: body[...], maskingKey: key)
        }
    }
    precondition(decode([encoded], masked: masked, limit: limit).events == events, "events do not round-trip")
    return 0
}

struct Decoded: Equatable {
    var events: [WebSocketFrameDecoder.Event]?
    var closeCode: UInt16?
}

func decode(_ pieces: [[UInt8]], masked: Bool, limit: Int) -> Decoded {
    var decoder = WebSocketFrameDecoder(maxMessageSize: limit, expectsMaskedFrames: masked)
    var events: [WebSocketFrameDecoder.Event] = []
    do {
        for piece in pieces { events += try decoder.feed(piece) }
    } catch {
        precondition(error.closeCode == 1002 || error.closeCode == 1009, "unexpected close code")
        return Decoded(events: nil, closeCode: error.closeCode)
    }
    return Decoded(events: events)
}
