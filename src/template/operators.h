// Python's operators on values: arithmetic with int/float promotion, floor division and modulo
// with Python signs, str/list concatenation and repetition, ordering comparisons that refuse
// mixed types, `in`, and Jinja2's `~` (string concatenation of str() forms).
//
// Integers are 64-bit: where Python would grow a big integer these return an OverflowError.
#pragma once

#include "template/ast.h"
#include "template/value.h"
#include "util/result.h"

namespace cadenza::tmpl {

class Interpreter;

// All binary operators except `and`/`or` (which short-circuit in the interpreter).
Result<Value> binary_op(Interpreter& in, BinaryOp op, const Value& a, const Value& b);
Result<Value> unary_op(UnaryOp op, const Value& v);
// ==, !=, <, <=, >, >=, in, not in.
Result<bool> compare_op(CompareOp op, const Value& a, const Value& b);
// Python's `item in container`.
Result<bool> contains(const Value& container, const Value& item);
// Three-way Python ordering (<0, 0, >0) for sorting: numbers, strings, lists/tuples; TypeError
// for other mixes ("'<' not supported between instances of 'int' and 'str'").
Result<int> py_compare(const Value& a, const Value& b);

// The UndefinedError (or SecurityError) an operation on an undefined value raises.
Error undefined_error(const Value& v);

}  // namespace cadenza::tmpl
