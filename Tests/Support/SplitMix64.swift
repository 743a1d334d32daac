/// The tests' one seeded generator (SplitMix64, Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", 2014): a seed replays a run exactly, which a failing
/// randomized test prints. Test targets used to carry a copy each. (The simulation keeps its
/// own, `SimRandom`: its seeds are pinned in tests and its stream is part of a seed's history.)
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in 0..<bound (0 for a bound below 1), by remainder: its small bias does not
    /// matter to a test.
    public mutating func next(_ bound: Int) -> Int { Int(next() % UInt64(max(bound, 1))) }

    /// A number in `range`, by remainder.
    public mutating func next(in range: ClosedRange<Int64>) -> Int64 {
        range.lowerBound + Int64(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }

    /// True `percent` times in a hundred.
    public mutating func chance(_ percent: Int) -> Bool { next(100) < percent }

    /// One element of a non-empty array.
    public mutating func pick<T>(_ from: [T]) -> T { from[next(from.count)] }
}
