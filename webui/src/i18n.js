// UI text in English and Chinese. t(key, vars) reads the current language; the choice is kept in
// localStorage ('cadenza.lang'), defaulting to the browser's language.
const en = {
  chat: 'Chat', server: 'Server', newChat: 'New chat', conversations: 'Conversations',
  send: 'Send', stop: 'Stop', regenerate: 'Regenerate', edit: 'Edit', save: 'Save & send',
  cancel: 'Cancel', delete: 'Delete', exportJson: 'Export', importJson: 'Import',
  placeholder: 'Message the model (Enter sends, Shift+Enter for a new line)',
  message: 'Message', settings: 'Settings', systemPrompt: 'System prompt', temperature: 'Temperature',
  topP: 'Top-p', maxTokens: 'Max tokens', stopSeq: 'Stop sequences (one per line)', seed: 'Seed',
  jsonMode: 'JSON mode (response_format: json_object)', model: 'Model', theme: 'Theme',
  light: 'Light', dark: 'Dark', language: 'Language', apiKey: 'API key',
  apiKeyNeeded: 'This server needs an API key', apiKeyHelp: 'The key is kept in this browser (localStorage) and sent as Authorization: Bearer.',
  apiKeyWrong: 'The server refused this key.', ok: 'OK', you: 'You', assistant: 'Assistant',
  reasoning: 'Reasoning', toolCalls: 'Tool calls', ttft: 'TTFT', tokensPerSec: 'tok/s', tokens: 'tokens',
  stopped: 'stopped', error: 'Error', empty: 'Start a conversation: type a message below.',
  imported: 'Imported {n} conversations', importFailed: 'Import failed: {e}',
  models: 'Models', running: 'Running', waiting: 'Waiting', kvUsage: 'KV cache usage',
  prefixHit: 'Prefix cache hit rate', tokensPerS: 'Generated tokens/s', ttftP: 'Time to first token (s)',
  itlP: 'Inter-token latency (s)', requests: 'Requests', replicas: 'Replicas', healthy: 'healthy',
  unhealthy: 'unhealthy', outstanding: 'In flight', tenants: 'Tenants (requests)', tenant: 'Tenant',
  upstream: 'Replica', health: 'Health', status: 'Status', lastMinutes: 'last {m} minutes, every {s} s',
  metricsUnavailable: 'Could not read /metrics: {e}', gateway: 'Gateway', noData: 'no data yet',
  maxModelLen: 'context', collapse: 'Toggle sidebar', copy: 'Copy', copied: 'Copied',
  kvTiers: 'KV cache tiers', tier: 'Tier', blocks: 'Blocks', used: 'Used', capacity: 'Budget',
  tierHits: 'Blocks found', hitsPerS: 'Found/s', promoted: 'Promoted', demoted: 'Demoted', evicted: 'Evicted',
};
const zh = {
  chat: '对话', server: '服务器', newChat: '新对话', conversations: '对话列表',
  send: '发送', stop: '停止', regenerate: '重新生成', edit: '编辑', save: '保存并发送',
  cancel: '取消', delete: '删除', exportJson: '导出', importJson: '导入',
  placeholder: '给模型发消息（Enter 发送，Shift+Enter 换行）',
  message: '消息', settings: '设置', systemPrompt: '系统提示词', temperature: '温度',
  topP: 'Top-p', maxTokens: '最大 token 数', stopSeq: '停止序列（每行一个）', seed: '随机种子',
  jsonMode: 'JSON 模式（response_format: json_object）', model: '模型', theme: '主题',
  light: '浅色', dark: '深色', language: '语言', apiKey: 'API 密钥',
  apiKeyNeeded: '此服务器需要 API 密钥', apiKeyHelp: '密钥保存在本浏览器（localStorage）中，以 Authorization: Bearer 发送。',
  apiKeyWrong: '服务器拒绝了此密钥。', ok: '确定', you: '你', assistant: '助手',
  reasoning: '推理过程', toolCalls: '工具调用', ttft: '首 token 时间', tokensPerSec: 'token/秒', tokens: 'token',
  stopped: '已停止', error: '错误', empty: '开始对话：在下方输入消息。',
  imported: '已导入 {n} 个对话', importFailed: '导入失败：{e}',
  models: '模型', running: '运行中', waiting: '等待中', kvUsage: 'KV 缓存使用率',
  prefixHit: '前缀缓存命中率', tokensPerS: '生成 token/秒', ttftP: '首 token 时间（秒）',
  itlP: 'token 间延迟（秒）', requests: '请求', replicas: '副本', healthy: '健康',
  unhealthy: '不健康', outstanding: '进行中', tenants: '租户（请求数）', tenant: '租户',
  upstream: '副本', health: '健康状态', status: '状态', lastMinutes: '最近 {m} 分钟，每 {s} 秒',
  metricsUnavailable: '无法读取 /metrics：{e}', gateway: '网关', noData: '暂无数据',
  maxModelLen: '上下文', collapse: '切换侧栏', copy: '复制', copied: '已复制',
  kvTiers: 'KV 缓存分层', tier: '层', blocks: '块数', used: '已用', capacity: '容量上限',
  tierHits: '命中块数', hitsPerS: '命中/秒', promoted: '提升', demoted: '下沉', evicted: '淘汰',
};
export const languages = { en: 'English', zh: '中文' };
const dicts = { en, zh };
let lang = localStorage.getItem('cadenza.lang') ||
  ((navigator.language || '').toLowerCase().startsWith('zh') ? 'zh' : 'en');
export const getLang = () => lang;
export function setLang(l) {
  lang = dicts[l] ? l : 'en';
  localStorage.setItem('cadenza.lang', lang);
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
}
setLang(lang);
export function t(key, vars) {
  let s = (dicts[lang] && dicts[lang][key]) || en[key] || key;
  if (vars) for (const [k, v] of Object.entries(vars)) s = s.replace(`{${k}}`, String(v));
  return s;
}
