// Builds the web console into OUT_DIR (default webui/dist): app.js and app.css bundled and
// minified by esbuild, index.html and the icon copied. Deterministic: the same sources and
// lockfile give the same bytes (no timestamps, no absolute paths, no source maps), which the
// webui_bundle_matches ctest checks (webui/check_dist.sh).
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = resolve(process.argv[2] || join(root, 'dist'));
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

await build({
  absWorkingDir: root,
  entryPoints: { app: 'src/main.jsx' },
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: out,
  legalComments: 'none',
  charset: 'utf8',
  sourcemap: false,
  logLevel: 'warning',
  define: { 'process.env.NODE_ENV': '"production"' },
});
for (const f of ['index.html', 'icon.svg']) copyFileSync(join(root, 'src', f), join(out, f));
console.log(`webui: ${readdirSync(out).sort().join(', ')} -> ${out}`);
