// Conversations and settings, kept in this browser's localStorage ('cadenza.conversations',
// 'cadenza.settings'). A conversation: {id, title, model, updated, messages: [{role, content,
// reasoning?, tool_calls?, stats?: {ttft_ms, tokens, tps, stopped?}, error?}]}.
const KEY = 'cadenza.conversations';

export function loadConversations() {
  try {
    const list = JSON.parse(localStorage.getItem(KEY) || '[]');
    return Array.isArray(list) ? list.filter(validConversation) : [];
  } catch { return []; }
}

export function saveConversations(list) {
  localStorage.setItem(KEY, JSON.stringify(list));
}

export function validConversation(c) {
  return c && typeof c.id === 'string' && Array.isArray(c.messages) &&
    c.messages.every((m) => m && typeof m.role === 'string' && typeof m.content === 'string');
}

export function newConversation() {
  return { id: `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
    title: '', model: '', updated: Date.now(), messages: [] };
}

export const defaultSettings = {
  system: '', temperature: 0.7, top_p: 1, max_tokens: 256, stop: '', seed: '', json: false,
};

export function loadSettings() {
  try { return { ...defaultSettings, ...JSON.parse(localStorage.getItem('cadenza.settings') || '{}') }; }
  catch { return { ...defaultSettings }; }
}
export function saveSettings(s) { localStorage.setItem('cadenza.settings', JSON.stringify(s)); }

// The export file: {"cadenza_conversations": 1, "conversations": [...]}. Import accepts that or a
// bare array; returns the valid conversations (throws on unreadable JSON).
export function exportJson(list) {
  return JSON.stringify({ cadenza_conversations: 1, conversations: list }, null, 2);
}
export function parseImport(text) {
  const data = JSON.parse(text);
  const list = Array.isArray(data) ? data : data && data.conversations;
  if (!Array.isArray(list)) throw new Error('no "conversations" array');
  return list.filter(validConversation);
}
