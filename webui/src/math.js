// Math typesetting with KaTeX (its fonts are bundled: webui/dist/fonts). A formula KaTeX cannot
// parse is shown as its TeX source (throwOnError false renders it in the error colour).
import katex from 'katex';
import 'katex/dist/katex.min.css';

export function renderMath(tex, display) {
  return katex.renderToString(tex, { displayMode: display, throwOnError: false, output: 'html', strict: 'ignore' });
}
