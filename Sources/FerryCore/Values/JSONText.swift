/// JSON string literals, written the same way by the server's answers and the client's
/// requests (both speak the auth API's JSON; FerryCore is what they share).
public enum JSONText {
    /// `s` as a quoted JSON string: quotes, backslashes and control characters escaped.
    ///
    /// Works on the UTF-8 bytes: only ASCII bytes are ever escaped, and every byte of a
    /// multi-byte character is 0x80 or above, so those are copied as they are. A string with
    /// nothing to escape (nearly all of them) is copied in one piece. The sync log quotes
    /// every upload's summary this way on the upload's path: appending scalar by scalar cost
    /// about 40,000 instructions per one-object upload (issue 23).
    public static func quote(_ s: String) -> String {
        var s = s
        if s.withUTF8({ !$0.contains(where: needsEscape) }) { return "\"" + s + "\"" }
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count + 16)
        appendQuoted(s, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `s` quoted (as `quote` writes it) to UTF-8 text being built.
    public static func appendQuoted(_ s: String, to out: inout [UInt8]) {
        var s = s
        out.append(UInt8(ascii: "\""))
        s.withUTF8 { bytes in
            for b in bytes {
                guard needsEscape(b) else {
                    out.append(b)
                    continue
                }
                out.append(UInt8(ascii: "\\"))
                switch b {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(b)
                case UInt8(ascii: "\n"): out.append(UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): out.append(UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): out.append(UInt8(ascii: "t"))
                default:
                    out.append(contentsOf: "u00".utf8)
                    out.append(hexDigit(b >> 4))
                    out.append(hexDigit(b & 0xF))
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func needsEscape(_ b: UInt8) -> Bool { b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") }

    private static func hexDigit(_ n: UInt8) -> UInt8 { n < 10 ? UInt8(ascii: "0") + n : UInt8(ascii: "a") + n - 10 }
}
