// node validate.mjs schema.json docs.jsonl
// Validates every line of docs.jsonl (one JSON document per line; blank lines skipped) against the
// JSON Schema in schema.json with ajv (draft 2020-12 when the schema says so or uses prefixItems /
// $defs, else draft-07) and ajv-formats. Exit status: 0 when all are valid; 1 at the first invalid
// or unparsable document, which is printed with its line number and ajv's errors; 2 for a bad
// schema or bad arguments.
import { readFileSync } from "node:fs";
import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const [schemaPath, docsPath] = process.argv.slice(2);
if (!schemaPath || !docsPath) {
  console.error("usage: node validate.mjs schema.json docs.jsonl");
  process.exit(2);
}

let schema;
try {
  schema = JSON.parse(readFileSync(schemaPath, "utf8"));
} catch (e) {
  console.error(`${schemaPath}: ${e.message}`);
  process.exit(2);
}
const text = JSON.stringify(schema);
const modern = (typeof schema === "object" && schema !== null &&
                String(schema.$schema ?? "").includes("2020-12")) ||
               text.includes('"prefixItems"') || text.includes('"$defs"');
const ajv = modern ? new Ajv2020({ allErrors: true, strict: false })
                   : new Ajv({ allErrors: true, strict: false });
addFormats(ajv);
let check;
try {
  check = ajv.compile(schema);
} catch (e) {
  console.error(`${schemaPath}: invalid schema: ${e.message}`);
  process.exit(2);
}

const lines = readFileSync(docsPath, "utf8").split("\n");
let count = 0;
for (let i = 0; i < lines.length; ++i) {
  const line = lines[i];
  if (line.trim() === "") continue;
  let doc;
  try {
    doc = JSON.parse(line);
  } catch (e) {
    console.log(`${docsPath}:${i + 1}: not JSON (${e.message}): ${line}`);
    process.exit(1);
  }
  if (!check(doc)) {
    console.log(`${docsPath}:${i + 1}: invalid: ${line}`);
    console.log(JSON.stringify(check.errors, null, 2));
    process.exit(1);
  }
  ++count;
}
console.log(`${count} valid`);
