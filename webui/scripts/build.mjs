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
  // KaTeX's fonts: only the woff2 files (every current browser reads them); the CSS's other
  // formats (woff, ttf) are dropped so that they are not bundled.
  loader: { '.woff2': 'file' },
  assetNames: 'fonts/[name]-[hash]',
  plugins: [{
    name: 'woff2-only',
    setup(b) {
      b.onLoad({ filter: /katex\.min\.css$/ }, async (args) => {
        const { readFile } = await import('node:fs/promises');
        const css = (await readFile(args.path, 'utf8')).replace(/,url\([^)]*\.(?:woff|ttf)\) format\("(?:woff|truetype)"\)/g, '');
        return { contents: css, loader: 'css' };
      });
    },
  }],
});
for (const f of ['index.html', 'icon.svg']) copyFileSync(join(root, 'src', f), join(out, f));
console.log(`webui: ${readdirSync(out, { recursive: true }).sort().join(', ')} -> ${out}`);
