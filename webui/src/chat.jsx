// The chat view: conversations (kept in localStorage, exported and imported as JSON), streamed
// answers with their TTFT and tokens/s, stop (aborts the request: the server cancels the
// generation), regenerate and edit, and the sampling settings.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { t } from './i18n.js';
import { streamChat } from './api.js';
import { renderMarkdown } from './markdown.js';
import { exportJson, loadConversations, loadSettings, newConversation, parseImport,
  saveConversations, saveSettings } from './store.js';

// The request body for a conversation's messages under `s` (the settings).
export function requestBody(model, messages, s) {
  const msgs = [];
  if (s.system.trim()) msgs.push({ role: 'system', content: s.system });
  for (const m of messages) msgs.push({ role: m.role, content: m.content });
  const body = { model, messages: msgs, stream: true, stream_options: { include_usage: true },
    temperature: Number(s.temperature), top_p: Number(s.top_p), max_tokens: Number(s.max_tokens) };
  const stop = s.stop.split('\n').filter((x) => x.length);
  if (stop.length) body.stop = stop.slice(0, 4);
  if (String(s.seed).trim() !== '') body.seed = Number(s.seed);
  if (s.json) body.response_format = { type: 'json_object' };
  return body;
}

function Markdown({ text }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div class="md" dangerouslySetInnerHTML={{ __html: html }} />;
}

function Stats({ s }) {
  if (!s) return null;
  const parts = [];
  if (s.ttft_ms != null) parts.push(`${t('ttft')} ${(s.ttft_ms / 1000).toFixed(2)} s`);
  if (s.tokens != null) parts.push(`${s.tokens} ${t('tokens')}`);
  if (s.tps != null) parts.push(`${s.tps.toFixed(1)} ${t('tokensPerSec')}`);
  if (s.stopped) parts.push(t('stopped'));
  return <div class="stats" data-testid="stats">{parts.join(' · ')}</div>;
}

function Message({ m, index, busy, last, onEdit, onRegenerate }) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(m.content);
  const user = m.role === 'user';
  return (
    <article class={`msg ${m.role}`} data-role={m.role} aria-label={user ? t('you') : t('assistant')}>
      <div class="who">{user ? t('you') : t('assistant')}</div>
      {m.reasoning && (
        <details class="reasoning"><summary>{t('reasoning')}</summary><div class="pre">{m.reasoning}</div></details>
      )}
      {editing ? (
        <div class="edit">
          <label class="sr-only" for={`edit-${index}`}>{t('edit')}</label>
          <textarea id={`edit-${index}`} value={draft} onInput={(e) => setDraft(e.currentTarget.value)} rows={4} />
          <div class="row">
            <button class="primary" onClick={() => { setEditing(false); onEdit(index, draft); }}>{t('save')}</button>
            <button onClick={() => { setEditing(false); setDraft(m.content); }}>{t('cancel')}</button>
          </div>
        </div>
      ) : user ? <div class="pre content">{m.content}</div> : <div class="content"><Markdown text={m.content} /></div>}
      {m.tool_calls && m.tool_calls.length > 0 && (
        <details class="tools" open><summary>{t('toolCalls')}</summary>
          {m.tool_calls.map((c, i) => (
            <pre key={i}><code>{`${c.function?.name || ''}(${c.function?.arguments || ''})`}</code></pre>
          ))}
        </details>
      )}
      {m.error && <div class="error" role="alert">{t('error')}: {m.error}</div>}
      {!user && <Stats s={m.stats} />}
      {!busy && !editing && (
        <div class="actions">
          {user && <button class="link" onClick={() => { setDraft(m.content); setEditing(true); }}>{t('edit')}</button>}
          {!user && last && <button class="link" onClick={onRegenerate}>{t('regenerate')}</button>}
        </div>
      )}
    </article>
  );
}

export function Chat({ model, models, setModel, notify }) {
  const [convs, setConvs] = useState(() => loadConversations());
  const [currentId, setCurrentId] = useState(() => localStorage.getItem('cadenza.current') || '');
  const [settings, setSettings] = useState(() => loadSettings());
  const [input, setInput] = useState('');
  const [busy, setBusy] = useState(false);
  const [sidebar, setSidebar] = useState(false);
  const abort = useRef(null);
  const end = useRef(null);
  const fileInput = useRef(null);

  const current = convs.find((c) => c.id === currentId) || null;
  useEffect(() => { saveConversations(convs); }, [convs]);
  useEffect(() => { localStorage.setItem('cadenza.current', currentId); }, [currentId]);
  useEffect(() => { saveSettings(settings); }, [settings]);
  useEffect(() => { end.current && end.current.scrollIntoView({ block: 'end' }); }, [current && current.messages]);

  const update = (id, fn) => setConvs((list) => list.map((c) => (c.id === id ? fn(c) : c)));

  async function generate(conv, messages) {
    const id = conv.id;
    const answer = { role: 'assistant', content: '', stats: {} };
    update(id, (c) => ({ ...c, messages: [...messages, answer], updated: Date.now(), model }));
    setBusy(true);
    const ctl = new AbortController();
    abort.current = ctl;
    const t0 = performance.now();
    let first = null, chunks = 0, usage = null;
    let content = '', reasoning = '', tools = [], error = null, stopped = false;
    const push = () => {
      const now = performance.now();
      const tokens = usage ? usage.completion_tokens : chunks;
      const stats = { ttft_ms: first === null ? null : first - t0, tokens,
        tps: first !== null && now > first && tokens > 1 ? (tokens - 1) / ((now - first) / 1000) : null, stopped };
      const msg = { role: 'assistant', content, stats };
      if (reasoning) msg.reasoning = reasoning;
      if (tools.length) msg.tool_calls = tools;
      if (error) msg.error = error;
      update(id, (c) => ({ ...c, messages: [...messages, msg] }));
    };
    try {
      await streamChat(requestBody(model, messages, settings), ctl.signal, (chunk) => {
        if (chunk.usage) usage = chunk.usage;
        const d = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (!d) return;
        if (d.content || d.reasoning_content || d.tool_calls) {
          if (first === null) first = performance.now();
          chunks++;
        }
        if (d.content) content += d.content;
        if (d.reasoning_content) reasoning += d.reasoning_content;
        for (const tc of d.tool_calls || []) {
          const i = tc.index ?? tools.length;
          const prev = tools[i] || { function: { name: '', arguments: '' } };
          tools[i] = { ...prev, id: tc.id || prev.id, function: {
            name: prev.function.name + (tc.function?.name || ''),
            arguments: prev.function.arguments + (tc.function?.arguments || '') } };
        }
        push();
      });
    } catch (e) {
      if (e.name === 'AbortError') stopped = true; else error = e.message;
    }
    push();
    abort.current = null;
    setBusy(false);
  }

  function send(e) {
    e && e.preventDefault();
    const text = input.trim();
    if (!text || busy || !model) return;
    let conv = current;
    if (!conv) {
      conv = newConversation();
      setConvs((list) => [conv, ...list]);
      setCurrentId(conv.id);
    }
    const messages = [...conv.messages, { role: 'user', content: text }];
    const title = conv.title || text.slice(0, 60);
    setConvs((list) => list.map((c) => (c.id === conv.id ? { ...c, title } : c)));
    setInput('');
    generate(conv, messages);
  }

  const stop = () => abort.current && abort.current.abort();
  const regenerate = () => {
    const msgs = current.messages;
    const cut = msgs[msgs.length - 1].role === 'assistant' ? msgs.length - 1 : msgs.length;
    generate(current, msgs.slice(0, cut));
  };
  const edit = (index, text) => generate(current, [...current.messages.slice(0, index), { role: 'user', content: text }]);

  function download() {
    const blob = new Blob([exportJson(convs)], { type: 'application/json' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = 'cadenza-conversations.json';
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }
  async function importFile(e) {
    const f = e.currentTarget.files[0];
    e.currentTarget.value = '';
    if (!f) return;
    try {
      const list = parseImport(await f.text());
      setConvs((old) => [...list.filter((c) => !old.some((o) => o.id === c.id)), ...old]);
      notify(t('imported', { n: list.length }));
    } catch (err) { notify(t('importFailed', { e: err.message })); }
  }
  const setS = (k) => (e) => setSettings({ ...settings, [k]: e.currentTarget.type === 'checkbox' ? e.currentTarget.checked : e.currentTarget.value });

  return (
    <div class={`chat ${sidebar ? 'show-sidebar' : ''}`}>
      <aside class="sidebar" aria-label={t('conversations')}>
        <button class="primary wide" onClick={() => { setCurrentId(''); setSidebar(false); }}>+ {t('newChat')}</button>
        <ul class="convs">
          {convs.map((c) => (
            <li key={c.id} class={c.id === currentId ? 'active' : ''}>
              <button class="conv" aria-current={c.id === currentId ? 'true' : undefined}
                onClick={() => { setCurrentId(c.id); setSidebar(false); }}>{c.title || t('newChat')}</button>
              <button class="icon" aria-label={`${t('delete')}: ${c.title}`} title={t('delete')}
                onClick={() => { setConvs(convs.filter((x) => x.id !== c.id)); if (c.id === currentId) setCurrentId(''); }}>×</button>
            </li>
          ))}
        </ul>
        <div class="row">
          <button onClick={download}>{t('exportJson')}</button>
          <button onClick={() => fileInput.current.click()}>{t('importJson')}</button>
          <input ref={fileInput} type="file" accept="application/json,.json" hidden onChange={importFile} aria-label={t('importJson')} />
        </div>
        <details class="settings">
          <summary>{t('settings')}</summary>
          <label>{t('model')}
            <select value={model} onChange={(e) => setModel(e.currentTarget.value)}>
              {models.map((m) => <option key={m.id} value={m.id}>{m.id}</option>)}
            </select>
          </label>
          <label>{t('systemPrompt')}<textarea rows={3} value={settings.system} onInput={setS('system')} /></label>
          <label>{t('temperature')} <output>{settings.temperature}</output>
            <input type="range" min="0" max="2" step="0.05" value={settings.temperature} onInput={setS('temperature')} /></label>
          <label>{t('topP')} <output>{settings.top_p}</output>
            <input type="range" min="0" max="1" step="0.01" value={settings.top_p} onInput={setS('top_p')} /></label>
          <label>{t('maxTokens')}<input type="number" min="1" value={settings.max_tokens} onInput={setS('max_tokens')} /></label>
          <label>{t('stopSeq')}<textarea rows={2} value={settings.stop} onInput={setS('stop')} /></label>
          <label>{t('seed')}<input type="number" value={settings.seed} onInput={setS('seed')} /></label>
          <label class="check"><input type="checkbox" checked={settings.json} onChange={setS('json')} />{t('jsonMode')}</label>
        </details>
      </aside>
      <section class="conversation" aria-label={t('chat')}>
        <button class="sidebar-toggle" aria-label={t('collapse')} onClick={() => setSidebar(!sidebar)}>☰</button>
        <div class="messages" aria-live="polite" data-testid="messages">
          {!current || current.messages.length === 0 ? <p class="empty">{t('empty')}</p> :
            current.messages.map((m, i) => (
              <Message key={`${current.id}-${i}`} m={m} index={i} busy={busy}
                last={i === current.messages.length - 1} onEdit={edit} onRegenerate={regenerate} />
            ))}
          <div ref={end} />
        </div>
        <form class="composer" onSubmit={send}>
          <label class="sr-only" for="prompt">{t('message')}</label>
          <textarea id="prompt" rows={2} placeholder={t('placeholder')} value={input}
            onInput={(e) => setInput(e.currentTarget.value)}
            onKeyDown={(e) => { if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) send(e); }} />
          {busy ? <button type="button" class="danger" data-testid="stop" onClick={stop}>{t('stop')}</button>
            : <button type="submit" class="primary" data-testid="send" disabled={!model}>{t('send')}</button>}
        </form>
      </section>
    </div>
  );
}
