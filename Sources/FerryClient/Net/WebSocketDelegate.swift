import FerryCore

/// What a `WebSocketClient` reports, always on the loop thread.
public protocol WebSocketDelegate: AnyObject {
    func webSocketDidOpen(_ socket: WebSocketClient)
    /// One complete message (fragments reassembled). Text messages arrive as their UTF-8 bytes.
    func webSocket(_ socket: WebSocketClient, didReceive message: [UInt8])
    /// Exactly once per connect(), whether the connection failed to open, the peer closed, a protocol error happened, or close() was called. error nil for a clean close.
    func webSocketDidClose(_ socket: WebSocketClient, error: FerryError?)
}
