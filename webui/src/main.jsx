// The Cadenza console: a header (view tabs, language, theme, API key), the chat and the server
// view. Served by `cadenza serve` and `cadenza gateway` at / (docs/webui.md).
import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { getLang, languages, setLang, t } from './i18n.js';
import { getJson, getKey, setKey, setUnauthorizedHandler } from './api.js';
import { Chat } from './chat.jsx';
import { ServerView } from './server.jsx';
import './style.css';

function applyTheme(theme) {
  document.documentElement.dataset.theme = theme;
  localStorage.setItem('cadenza.theme', theme);
}

function KeyDialog({ onDone }) {
  const ref = useRef(null);
  const [value, setValue] = useState(getKey());
  useEffect(() => { ref.current.showModal(); }, []);
  return (
    <dialog ref={ref} class="key-dialog" aria-labelledby="key-title" data-testid="key-dialog"
      onCancel={(e) => { e.preventDefault(); }}>
      <form method="dialog" onSubmit={(e) => { e.preventDefault(); setKey(value.trim()); ref.current.close(); onDone(); }}>
        <h2 id="key-title">{t('apiKeyNeeded')}</h2>
        {getKey() && <p class="error">{t('apiKeyWrong')}</p>}
        <label for="api-key">{t('apiKey')}</label>
        <input id="api-key" type="password" autocomplete="off" value={value} onInput={(e) => setValue(e.currentTarget.value)} autofocus />
        <p class="hint">{t('apiKeyHelp')}</p>
        <div class="row"><button class="primary" type="submit">{t('ok')}</button>
          <button type="button" onClick={() => { ref.current.close(); onDone(); }}>{t('cancel')}</button></div>
      </form>
    </dialog>
  );
}

function App() {
  const [, setLangState] = useState(getLang());
  const [theme, setTheme] = useState(document.documentElement.dataset.theme);
  const [view, setView] = useState(location.hash === '#server' ? 'server' : 'chat');
  const [models, setModels] = useState([]);
  const [model, setModel] = useState(localStorage.getItem('cadenza.model') || '');
  const [needKey, setNeedKey] = useState(false);
  const [toast, setToast] = useState('');

  const loadModels = async () => {
    try {
      const r = await getJson('/v1/models');
      const list = (r.data || []).filter((m) => m && typeof m.id === 'string');
      setModels(list);
      setModel((cur) => (list.some((m) => m.id === cur) ? cur : list.length ? list[0].id : ''));
    } catch (e) { if (e.status !== 401) setToast(e.message); }
  };
  useEffect(() => {
    setUnauthorizedHandler(() => setNeedKey(true));
    loadModels();
  }, []);
  useEffect(() => { if (model) localStorage.setItem('cadenza.model', model); }, [model]);
  useEffect(() => { location.hash = view === 'server' ? 'server' : ''; }, [view]);
  useEffect(() => { if (toast) { const id = setTimeout(() => setToast(''), 4000); return () => clearTimeout(id); } }, [toast]);

  return (
    <div class="app">
      <header class="top">
        <span class="brand" aria-hidden="true">Cadenza</span>
        <nav class="tabs" role="tablist" aria-label="Cadenza">
          {['chat', 'server'].map((v) => (
            <button key={v} role="tab" id={`tab-${v}`} aria-selected={view === v} aria-controls="main"
              data-testid={`tab-${v}`} onClick={() => setView(v)}>{t(v)}</button>
          ))}
        </nav>
        <div class="top-tools">
          <label class="sr-only" for="lang">{t('language')}</label>
          <select id="lang" data-testid="lang" value={getLang()} onChange={(e) => { setLang(e.currentTarget.value); setLangState(e.currentTarget.value); }}>
            {Object.entries(languages).map(([k, v]) => <option key={k} value={k}>{v}</option>)}
          </select>
          <button data-testid="theme" aria-label={`${t('theme')}: ${theme === 'dark' ? t('dark') : t('light')}`}
            onClick={() => { const n = theme === 'dark' ? 'light' : 'dark'; applyTheme(n); setTheme(n); }}>
            {theme === 'dark' ? '☾' : '☀'}
          </button>
          <button data-testid="key" aria-label={t('apiKey')} title={t('apiKey')} onClick={() => setNeedKey(true)}>🔑</button>
        </div>
      </header>
      <main id="main" role="tabpanel" aria-labelledby={`tab-${view}`}>
        {view === 'chat' ? <Chat model={model} models={models} setModel={setModel} notify={setToast} />
          : <ServerView models={models} />}
      </main>
      {needKey && <KeyDialog onDone={() => { setNeedKey(false); loadModels(); }} />}
      {toast && <div class="toast" role="status">{toast}</div>}
    </div>
  );
}

applyTheme(localStorage.getItem('cadenza.theme') ||
  (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'));
render(<App />, document.getElementById('app'));
