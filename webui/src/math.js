// Math typesetting. Plain fallback: the TeX source in a <code class="math"> (no KaTeX bundled yet).
const esc = (s) => s.replace(/[&<>]/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' }[ch]));
export function renderMath(tex, display) {
  return display ? `<pre class="math"><code>${esc(tex)}</code></pre>` : `<code class="math">${esc(tex)}</code>`;
}
