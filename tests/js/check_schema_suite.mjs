// node check_schema_suite.mjs [dir]   (default: ../grammar/schemas)
// Checks the converter test suite's data against ajv: in every {"schema", "valid", "invalid",
// "valid_text"} file, each valid document (and each valid_text, parsed) must pass and each
// invalid one must fail. rejected_text entries are grammar policy (order, whitespace), not
// schema validity, and are not checked. Exit status 1 on the first disagreement.
import { readFileSync, readdirSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const dir = process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), "../grammar/schemas");
let files = 0, docs = 0;
for (const name of readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
  const c = JSON.parse(readFileSync(join(dir, name), "utf8"));
  const text = JSON.stringify(c.schema);
  const modern = String(c.schema?.$schema ?? "").includes("2020-12") ||
                 text.includes('"prefixItems"') || text.includes('"$defs"');
  const ajv = modern ? new Ajv2020({ strict: false }) : new Ajv({ strict: false });
  addFormats(ajv);
  const check = ajv.compile(c.schema);
  const valid = [...c.valid, ...(c.valid_text ?? []).map((t) => JSON.parse(t))];
  for (const d of valid) {
    if (!check(d)) {
      console.log(`${name}: ajv rejects a valid document: ${JSON.stringify(d)}`);
      console.log(JSON.stringify(check.errors));
      process.exit(1);
    }
    ++docs;
  }
  for (const d of c.invalid) {
    if (check(d)) {
      console.log(`${name}: ajv accepts an invalid document: ${JSON.stringify(d)}`);
      process.exit(1);
    }
    ++docs;
  }
  ++files;
}
console.log(`${files} schemas, ${docs} documents agree with ajv`);
