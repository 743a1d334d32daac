import FerryCore


/// A small bounded queue between one connection's reader and its processor: the reader keeps
/// reading the socket (and so notices at once when the client goes away) while the hub works on
/// an earlier message, and stops reading when `capacity` messages wait, which pushes back on the
/// client through TCP. One producer, one consumer.
final class MessageQueue<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var finished = false
        var consumer: CheckedContinuation<Element?, Never>?
        var producer: CheckedContinuation<Void, Never>?
    }

    private enum PushStep {
        case done(Bool)
        case handOver(CheckedContinuation<Element?, Never>)
        case wait
    }

    private enum NextStep {
        case ready(Element?, CheckedContinuation<Void, Never>?)
        case wait
    }

    let capacity: Int
    private let state = LockedValue(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Adds `element`, waiting while the queue is full; false once the queue is finished (the
    /// element is then dropped).
    func push(_ element: Element) async -> Bool {
        while true {
            let step: PushStep = state.withLock { s in
                if s.finished { return .done(false) }
                if let consumer = s.consumer {
                    s.consumer = nil
                    return .handOver(consumer)
                }
                if s.items.count < capacity {
                    s.items.append(element)
                    return .done(true)
                }
                return .wait
            }
            switch step {
            case .done(let pushed): return pushed
            case .handOver(let consumer):
                consumer.resume(returning: element)
                return true
            case .wait:
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                        let ready = state.withLock { s in
                            if s.finished || s.items.count < capacity { return true }
                            s.producer = c
                            return false
                        }
                        if ready { c.resume() }
                    }
                } onCancel: {
                    finish()
                }
            }
        }
    }

    /// The next element, waiting for one; nil once the queue is finished (what it still held
    /// is dropped: the connection is gone).
    func next() async -> Element? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Element?, Never>) in
                let step: NextStep = state.withLock { s in
                    if s.finished { return .ready(nil, nil) }
                    if !s.items.isEmpty {
                        let producer = s.producer
                        s.producer = nil
                        return .ready(s.items.removeFirst(), producer)
                    }
                    s.consumer = c
                    return .wait
                }
                if case .ready(let element, let producer) = step {
                    producer?.resume()
                    c.resume(returning: element)
                }
            }
        } onCancel: {
            finish()
        }
    }

    /// The next element if one is already queued and `wanted` accepts it, without waiting:
    /// the processor looks one message ahead to start work that may overlap the current one.
    func next(ifReady wanted: (Element) -> Bool) -> Element? {
        let (element, producer): (Element?, CheckedContinuation<Void, Never>?) = state.withLock { s in
            guard !s.finished, let first = s.items.first, wanted(first) else { return (nil, nil) }
            s.items.removeFirst()
            let producer = s.producer
            s.producer = nil
            return (first, producer)
        }
        producer?.resume()
        return element
    }

    /// Ends the queue: both sides stop waiting.
    func finish() {
        let (consumer, producer) = state.withLock { s in
            s.finished = true
            s.items.removeAll()
            defer {
                s.consumer = nil
                s.producer = nil
            }
            return (s.consumer, s.producer)
        }
        consumer?.resume(returning: nil)
        producer?.resume()
    }
}
