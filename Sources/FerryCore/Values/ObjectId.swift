/// A 12-byte ObjectId in MongoDB's and Realm's format, laid out as UUIDv7 and ULID lay out
/// theirs: ordered by time, unpredictable after it.
///
///     bytes 0..<4   seconds since the epoch, big-endian
///     bytes 4..<7   a 24-bit counter within that second (big-endian)
///     bytes 7..<12  40 bits from the system's CSPRNG, fresh for every id
///
/// Ids made in one process are strictly increasing (see `ObjectId.Generator`), so a million
/// inserts append at the end of a primary key's B-tree instead of landing at random places in
/// it (issue 23: random keys after the time prefix cost the insert benchmark 4.4x).
///
/// Primary keys are global per class, so one id must not tell anyone the next ones (issue 11;
/// MongoDB's per-process random part and counter would). Here the counter says where the next
/// id of the same process falls in the second, but its last 40 bits are drawn afresh: someone
/// who saw an id and wants to take the next one first has one chance in 2^40 (about 10^12) per
/// attempt, and for another device's id does not know its counter either (each second's counter
/// starts at a random value below 2^23). Two devices' ids in the same second collide only if
/// both the counter and the 40 bits agree: about 2^-63 for a pair of ids, as with 64 random bits.
public struct ObjectId: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var bytes: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)

    public init(bytes: [UInt8]) throws {
        guard bytes.count == 12 else { throw FerryError(.invalidArgument, "an ObjectId has 12 bytes, got \(bytes.count)") }
        self.bytes = (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5],
                      bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11])
    }

    public init(tuple: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)) {
        bytes = tuple
    }

    /// Reads 12 bytes from memory.
    public init(raw p: UnsafeRawPointer) {
        var t: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &t) { $0.copyMemory(from: UnsafeRawBufferPointer(start: p, count: 12)) }
        bytes = t
    }

    /// Parses 24 hexadecimal digits.
    public init(hex: String) throws {
        let digits = Array(hex.utf8)
        guard digits.count == 24 else { throw FerryError(.invalidArgument, "an ObjectId is 24 hex digits, got '\(hex)'") }
        var out = [UInt8](repeating: 0, count: 12)
        for i in 0..<12 {
            guard let hi = hexDigitValue(digits[2 * i]), let lo = hexDigitValue(digits[2 * i + 1]) else {
                throw FerryError(.invalidArgument, "an ObjectId is 24 hex digits, got '\(hex)'")
            }
            out[i] = hi << 4 | lo
        }
        try self.init(bytes: out)
    }

    /// A new ObjectId for the given time from the process-wide generator
    /// (`Generator.shared`): strictly greater than every id it made before, on any thread.
    public static func generate(secondsSinceEpoch: UInt32) -> ObjectId {
        Generator.shared.next(secondsSinceEpoch: secondsSinceEpoch)
    }

    /// Makes strictly increasing ids: the seconds, a counter within the second, 40 random bits.
    ///
    /// A new second (later than the last id's) starts the counter at a random value below 2^23,
    /// so every second has room for at least 2^23 (8.4 million) ids; each further id in the
    /// same second takes the next value. If the counter runs out, or the clock goes back, the
    /// prefix stays ahead of the clock (the last id's second, plus one when the counter runs
    /// out) until the clock catches up: order wins over the prefix's accuracy. One lock
    /// (`ThreadLock`) around two integers; the random bits (one `getrandom` per id, as before)
    /// are drawn outside it.
    public final class Generator: @unchecked Sendable {
        /// The generator behind `ObjectId.generate`, shared by the whole process.
        public static let shared = Generator()

        static let tailBits: UInt64 = 40
        private let lock = ThreadLock()
        private let counterLimit: UInt32
        private var seconds: UInt32 = 0
        private var counter: UInt32 = 0
        private var started = false

        public convenience init() { self.init(counterBits: 24) }

        /// `counterBits` below 24 only for tests that need the counter to run out quickly.
        init(counterBits: UInt32) {
            precondition((2...24).contains(counterBits))
            counterLimit = 1 << counterBits
        }

        public func next(secondsSinceEpoch now: UInt32) -> ObjectId {
            var g = SystemRandomNumberGenerator()
            let r: UInt64 = g.next()
            let tail = r & (1 << Self.tailBits - 1)
            // The other 24 bits of the same draw: a start in the lower half of the counter.
            let start = UInt32(truncatingIfNeeded: r >> Self.tailBits) & (counterLimit / 2 - 1)
            let (s, c): (UInt32, UInt32) = lock.withLock {
                if !started || now > seconds {
                    seconds = now
                    counter = start
                    started = true
                } else if counter + 1 < counterLimit {
                    counter += 1
                } else {
                    // In the year 2106 this wraps; nothing made here lives that long.
                    seconds &+= 1
                    counter = start
                }
                return (seconds, counter)
            }
            let t = UInt64(s), m = UInt64(c)
            func byte(_ v: UInt64, _ shift: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: v >> shift) }
            return ObjectId(tuple: (byte(t, 24), byte(t, 16), byte(t, 8), byte(t, 0),
                                    byte(m, 16), byte(m, 8), byte(m, 0),
                                    byte(tail, 32), byte(tail, 24), byte(tail, 16), byte(tail, 8), byte(tail, 0)))
        }
    }

    public var array: [UInt8] {
        withUnsafeBytes(of: bytes) { Array($0) }
    }

    public var description: String { hexString(array) }

    /// The 12 bytes as two big-endian integers: comparing them compares the bytes in order.
    /// Equality, hashing and ordering run on every dictionary lookup and sort of objects by
    /// key (the server's merge does several per uploaded object), so they neither loop over
    /// bytes nor allocate.
    private var words: (high: UInt64, low: UInt32) {
        withUnsafeBytes(of: bytes) { p in
            (UInt64(bigEndian: p.loadUnaligned(as: UInt64.self)), UInt32(bigEndian: p.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        }
    }

    public static func == (a: ObjectId, b: ObjectId) -> Bool {
        let (x, y) = (a.words, b.words)
        return x.high == y.high && x.low == y.low
    }
    public func hash(into hasher: inout Hasher) {
        let w = words
        hasher.combine(w.high)
        hasher.combine(w.low)
    }
    public static func < (a: ObjectId, b: ObjectId) -> Bool {
        let (x, y) = (a.words, b.words)
        return x.high != y.high ? x.high < y.high : x.low < y.low
    }
}

func hexDigitValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}

func hexString(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
    return String(decoding: out, as: UTF8.self)
}
