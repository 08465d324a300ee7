// JSON Schema to GBNF: the grammar behind `response_format: {"type": "json_schema"}` and tool
// parameters. The grammar accepts JSON text (whitespace policy of json_grammar.h) that the schema
// accepts; it may be narrower than the schema (see "Narrower" below), never wider, except where
// stated under "Not enforced". Full reference: docs/structured-output.md.
//
// Keywords
//   type            string, number, integer, boolean, null, object, array, or an array of them
//                   (keywords of one type apply to that type's branch only). Without `type`, the
//                   types are inferred from the keywords present (properties -> object, items ->
//                   array, minLength -> string, ...); with none of those, any JSON value.
//   properties      emitted in declaration order (pass nlohmann::ordered_json or the text overload
//                   to keep that order; nlohmann::json sorts keys alphabetically)
//   required        listed properties must appear; the others may be left out (order kept)
//   additionalProperties  false: no other keys. true, a schema, or absent (non-strict): other keys
//                   (not the declared names), values of that schema (any value for true / absent),
//                   after the declared ones.
//   items, prefixItems, minItems, maxItems (<= 100000); uniqueItems only `false`
//   enum, const     any JSON values, matched as their compact serialization (nlohmann dump())
//   anyOf, oneOf    alternatives (oneOf's exclusivity is not enforced)
//   allOf           merged into one schema when the parts do not conflict ($ref parts resolved;
//                   properties merged, required united, equal keywords kept), else an Error
//   $ref            "#", "#/$defs/...", "#/definitions/..." and any other local JSON pointer;
//                   recursion allowed; each referenced schema becomes one rule. $defs /
//                   definitions hold them.
//   minLength, maxLength, pattern (regex_to_gbnf.h, JSON Schema's search semantics: a side without
//                   ^ / $ accepts any text there), format: date, time, date-time, uuid, email
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum: integers any int64 range (digit-range
//                   decomposition); numbers integer-valued minimum / maximum (json_number_range:
//                   written without exponent); fractional or exclusive number bounds are Errors
//   annotations, ignored: description, title, default, examples, $schema, $id, $comment,
//                   deprecated, readOnly, writeOnly
// Any other keyword, or a keyword value of the wrong type, is an Error.
//
// strict (OpenAI's strict mode, the default): as OpenAI requires, every object schema must say
// `additionalProperties: false` and list all its properties in `required`; both are Errors
// otherwise (with strict = false, optional properties and other keys are allowed). OpenAI's other
// limits (root must be an object, depth, counts) are not checked.
//
// Narrower: integers are written without fraction or exponent (1 but not 1.0); "-0" is not a
// bounded integer; bounded numbers have no exponent; enum / const values only in their compact
// serialization; declared properties only in declaration order, other keys after them; JSON
// escapes other than the needed ones are not produced inside pattern / format strings (e.g.
// "\u0041" for "A"); without `type`, only the types the keywords imply; digits are bounded
// (json_grammar.h).
// Not enforced: oneOf exclusivity; an extra key written with escapes ("\u0061ge") equal to a
// declared name.
//
// Errors: every message starts with the JSON pointer of the problem, e.g.
// "/properties/age/minimum: ..." ("(root)" for the whole schema), then says what is wrong.
// The output is one rule per line, "name ::= body", the root rule first; names are rule_prefix +
// root_name for the root and rule_prefix + a name derived from the schema path for the others,
// so grammars with different prefixes can be concatenated into one.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace cadenza {

struct SchemaGrammarOptions {
  std::string rule_prefix;          // [a-zA-Z0-9-]*, prepended to every rule name
  std::string root_name = "root";   // [a-zA-Z0-9-]+
  bool strict = true;               // OpenAI strict mode (see above)
  size_t max_output_bytes = 1 << 20;  // larger grammars are an Error
};

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema,
                                        const SchemaGrammarOptions& opt = {});
// The same; the schema's keys come in nlohmann::json's (sorted) order.
Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema,
                                        const SchemaGrammarOptions& opt = {});
// Parses the schema text (keeping declaration order), then converts. Error "(root): invalid JSON".
Result<std::string> json_schema_text_to_gbnf(std::string_view schema_text,
                                             const SchemaGrammarOptions& opt = {});

}  // namespace cadenza
