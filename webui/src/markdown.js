// Markdown to sanitized HTML: marked (GFM), code blocks highlighted by highlight.js (a set of
// common languages), math ($...$, $$...$$, \(...\), \[...\]) typeset by KaTeX when present,
// everything through DOMPurify (the model's text is untrusted).
import { Marked } from 'marked';
import DOMPurify from 'dompurify';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';
import { renderMath } from './math.js';

const langs = { bash, c, cpp, css, go, java, javascript, json, markdown, python, rust, sql,
  typescript, xml, yaml };
for (const [name, def] of Object.entries(langs)) hljs.registerLanguage(name, def);
hljs.registerAliases(['sh', 'shell'], { languageName: 'bash' });
hljs.registerAliases(['js'], { languageName: 'javascript' });
hljs.registerAliases(['ts'], { languageName: 'typescript' });
hljs.registerAliases(['html'], { languageName: 'xml' });
hljs.registerAliases(['py'], { languageName: 'python' });

const escapeHtml = (s) => s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[ch]));

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    code({ text, lang }) {
      const l = (lang || '').split(/\s/)[0];
      const html = l && hljs.getLanguage(l) ? hljs.highlight(text, { language: l }).value
        : hljs.highlightAuto(text).value;
      return `<pre><code class="hljs">${html}</code></pre>`;
    },
  },
  extensions: renderMath ? [
    {
      name: 'mathBlock', level: 'block',
      start: (src) => src.match(/\$\$|\\\[/)?.index,
      tokenizer(src) {
        const m = /^(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\])/.exec(src);
        if (m) return { type: 'mathBlock', raw: m[0], text: m[1] ?? m[2] };
      },
      renderer: (tok) => renderMath(tok.text, true),
    },
    {
      name: 'mathInline', level: 'inline',
      start: (src) => src.match(/\$|\\\(/)?.index,
      tokenizer(src) {
        const m = /^(?:\$(?!\s)([^$\n]+?)(?<!\s)\$(?!\d)|\\\((.+?)\\\))/.exec(src);
        if (m) return { type: 'mathInline', raw: m[0], text: m[1] ?? m[2] };
      },
      renderer: (tok) => renderMath(tok.text, false),
    },
  ] : [],
});

export function renderMarkdown(text) {
  let html;
  try { html = marked.parse(text); } catch { html = `<p>${escapeHtml(text)}</p>`; }
  return DOMPurify.sanitize(html, { ADD_ATTR: ['aria-hidden'] });
}
