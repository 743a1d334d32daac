/// Finds where a connection's first HTTP request head ends (the empty line after the header
/// fields), reading the bytes as they arrive, without keeping them. `ConnectionGuard` uses it
/// for the header timeout before Hummingbird's HTTP parser has said anything. Empty lines
/// before the request line do not count (HTTP parsers skip them), so `\r\n` alone never
/// passes for a complete head.
struct RequestHeadScanner {
    private var sawRequestByte = false
    /// The line-ending bytes seen since the last other byte, as they matter for "\r\n\r\n" and
    /// "\n\n": 0 none, 1 "\r", 2 "\r\n" or "\n", 3 "\r\n\r".
    private var state = 0

    /// The number of bytes of `bytes` up to and including the end of the head, if it ends in them.
    mutating func scan(_ bytes: some Collection<UInt8>) -> Int? {
        var count = 0
        for byte in bytes {
            count += 1
            switch byte {
            case UInt8(ascii: "\r"):
                state = state == 2 ? 3 : 1
            case UInt8(ascii: "\n"):
                if sawRequestByte, state == 2 || state == 3 { return count }
                state = 2
            default:
                sawRequestByte = true
                state = 0
            }
        }
        return nil
    }
}
