/// Resolves a parsed query against a class and checks every comparison's types, so that a
/// query that cannot mean anything fails at once with a message naming the property.
struct QueryCompiler {
    let schema: ObjectSchema
    let arguments: [FerryValue]

    /// Recurses once per level of the tree, which the parser bounds (`QueryLimits.maxDepth`);
    /// the operands of a chain are compiled by a loop.
    mutating func compile(_ node: QueryNode) throws -> Predicate {
        switch node {
        case .constant(let b): return .constant(b)
        case .and(let operands): return .and(try operands.map { try compile($0) })
        case .or(let operands): return .or(try operands.map { try compile($0) })
        case .not(let a): return .not(try compile(a))
        case .comparison(let c): return try compileComparison(c)
        }
    }

    private func fail(_ offset: Int, _ message: String) -> FerryError {
        FerryError(.query, "bad query at offset \(offset): \(message)")
    }

    private func property(_ name: String, _ offset: Int) throws -> (Int, Property) {
        guard let i = schema.propertyIndex(named: name) else {
            throw fail(offset, "class '\(schema.name)' has no property '\(name)'")
        }
        return (i, schema.properties[i])
    }

    private func value(of operand: QueryOperand) throws -> FerryValue {
        switch operand {
        case .literal(let v, _): return v
        case .argument(let n, let offset):
            guard n < arguments.count else {
                throw fail(offset, "the query uses $\(n) but \(arguments.count) argument\(arguments.count == 1 ? " was" : "s were") given")
            }
            let v = arguments[n]
            if case .list = v { throw fail(offset, "argument $\(n) is a list; only single values can be arguments") }
            return v
        case .property, .set: throw fail(operand.offset, "expected a value")
        }
    }

    private func compileComparison(_ c: QueryComparison) throws -> Predicate {
        // Normalise so the property is on the left.
        var lhs = c.lhs, rhs = c.rhs, op = c.op
        if case .property = lhs {} else if case .property = rhs {
            if op == .in {
                // value IN listProperty  ==  ANY listProperty == value
                guard case .property(let name, let count, let offset) = rhs, !count else { throw fail(c.offset, "IN needs a list property or { } on its right") }
                let (i, p) = try property(name, offset)
                guard p.isList else { throw fail(offset, "'\(name)' is not a list; write '\(name) == value' instead of 'value IN \(name)'") }
                let v = try value(of: lhs)
                try checkValue(v, against: p, op: .equal, caseInsensitive: c.caseInsensitive, offset: c.offset)
                return .compare(property: i, op: .equal, value: v, caseInsensitive: c.caseInsensitive, quantifier: .any)
            }
            guard let flipped = op.flipped else { throw fail(c.offset, "\(op.rawValue) needs the property on its left") }
            swap(&lhs, &rhs)
            op = flipped
        }
        guard case .property(let name, let isCount, let offset) = lhs else {
            throw fail(c.offset, "a comparison needs a property on one side")
        }
        let (index, prop) = try property(name, offset)
        if c.quantifier != nil && !prop.isList { throw fail(c.offset, "ANY, ALL and NONE apply to list properties; '\(name)' is not a list") }

        if isCount {
            guard prop.isList else { throw fail(offset, "@count and @size apply to list properties; '\(name)' is not a list") }
            guard c.quantifier == nil, !c.caseInsensitive, !op.isStringOperator, op != .in else { throw fail(c.offset, "@count compares with numbers only") }
            let v = try value(of: rhs)
            guard v.type?.isNumeric == true else { throw fail(rhs.offset, "@count compares with numbers, got \(v.debugText)") }
            return .count(property: index, op: op, value: v)
        }

        if case .property(let otherName, let otherCount, let otherOffset) = rhs {
            let (other, otherProp) = try property(otherName, otherOffset)
            guard !prop.isList, !otherProp.isList, !otherCount else { throw fail(c.offset, "comparing two properties works on single-valued properties only") }
            let compatible = prop.valueType == otherProp.valueType || (prop.valueType.isNumeric && otherProp.valueType.isNumeric)
            guard compatible, op != .in else { throw fail(c.offset, "cannot compare '\(name)' (\(prop.typeText)) with '\(otherName)' (\(otherProp.typeText))") }
            try checkOperator(op, prop: prop, caseInsensitive: c.caseInsensitive, offset: c.offset)
            return .compareProperties(lhs: index, op: op, rhs: other, caseInsensitive: c.caseInsensitive)
        }

        if op == .in {
            guard case .set(let items, _) = rhs else {
                throw fail(rhs.offset, "IN needs a set of values in braces, e.g. {\"a\", \"b\"}")
            }
            let values = try items.map { try value(of: $0) }
            for v in values { try checkValue(v, against: prop, op: .equal, caseInsensitive: c.caseInsensitive, offset: c.offset) }
            return .inSet(property: index, values: values, caseInsensitive: c.caseInsensitive, quantifier: prop.isList ? (c.quantifier ?? .any) : nil)
        }
        if case .set = rhs { throw fail(rhs.offset, "a set of values in braces goes with IN only") }
        let v = try value(of: rhs)
        try checkValue(v, against: prop, op: op, caseInsensitive: c.caseInsensitive, offset: c.offset)
        return .compare(property: index, op: op, value: v, caseInsensitive: c.caseInsensitive, quantifier: prop.isList ? (c.quantifier ?? .any) : nil)
    }

    private func checkOperator(_ op: QueryOperator, prop: Property, caseInsensitive: Bool, offset: Int) throws {
        let t = prop.valueType
        if op.isOrdering && !t.isOrdered {
            throw fail(offset, "\(op.rawValue) does not apply to '\(prop.name)' (\(prop.typeText)); use == or !=")
        }
        if op.isStringOperator && t != .string && t != .binary {
            throw fail(offset, "\(op.rawValue) applies to strings and binaries; '\(prop.name)' is \(prop.typeText)")
        }
        if op == .like && t != .string { throw fail(offset, "LIKE applies to strings; '\(prop.name)' is \(prop.typeText)") }
        if caseInsensitive && (t != .string || op.isOrdering) {
            throw fail(offset, "[c] applies to string equality and string operators")
        }
    }

    private func checkValue(_ v: FerryValue, against prop: Property, op: QueryOperator, caseInsensitive: Bool, offset: Int) throws {
        try checkOperator(op, prop: prop, caseInsensitive: caseInsensitive, offset: offset)
        guard let vt = v.type else {
            // null: only equality makes sense.
            guard op == .equal || op == .notEqual else { throw fail(offset, "\(op.rawValue) cannot compare with null") }
            return
        }
        let t = prop.valueType
        let ok: Bool
        if op.isStringOperator { ok = vt == .string || (t == .binary && vt == .binary) }
        else { ok = vt == t || (vt.isNumeric && t.isNumeric) }
        guard ok else {
            throw fail(offset, "cannot compare '\(prop.name)' (\(prop.typeText)) with \(vt) value \(v.debugText)")
        }
    }
}
