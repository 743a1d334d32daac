import CFerry
import FerryCore
import FerryStore

// Queries and results. See ferry.h.

@c @implementation
public func ferry_db_query(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ db: OpaquePointer!, _ cls: UInt32, _ query: UnsafePointer<CChar>!, _ args: UnsafePointer<ferry_value_t>!, _ argCount: Int) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let out = try required(out, "out")
        let text = try hostString(query, "query")
        guard argCount >= 0 && argCount <= 10_000 else { throw FerryError(.invalidArgument, "arg_count \(argCount) is out of range") }
        let arguments = try ferryValues(args, argCount, "args")
        try h.checkOpen()
        let os = try h.objectSchema(cls)
        let rows = try h.database.query(classIndex: Int(cls), query: text, arguments: arguments)
        out.pointee = HandleTable.shared.register(ResultsHandle(classIndex: cls, objectSchema: os, rows: rows), kind: .results)
    }
}

private func resultsHandle(_ p: OpaquePointer?) throws -> ResultsHandle {
    try HandleTable.shared.lookup(p, .results, as: ResultsHandle.self)
}

@c @implementation
public func ferry_results_count(_ out: UnsafeMutablePointer<Int>!, _ results: OpaquePointer!) -> Int32 {
    ferryCall {
        let r = try resultsHandle(results)
        try required(out, "out").pointee = r.rows.count
    }
}

@c @implementation
public func ferry_results_get(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ results: OpaquePointer!, _ index: Int) -> Int32 {
    ferryCall {
        let r = try resultsHandle(results)
        let out = try required(out, "out")
        guard index >= 0 && index < r.rows.count else {
            throw FerryError(.outOfRange, "index \(index) is out of range for results of \(r.rows.count) object\(r.rows.count == 1 ? "" : "s")")
        }
        out.pointee = HandleTable.shared.register(ObjectHandle(classIndex: r.classIndex, objectSchema: r.objectSchema, values: r.rows[index]), kind: .object)
    }
}

@c @implementation
public func ferry_results_free(_ results: OpaquePointer!) {
    _ = HandleTable.shared.remove(results, .results, as: ResultsHandle.self)
}
