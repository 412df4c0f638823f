// The metadata editor: records listed page by page or searched (the search
// API's own semantics), one record's fields with an editor chosen by the
// schema's hint, its content IDs, the key tree by prefix, and the events
// each change makes. Every change goes through the public API.
'use strict';
import { $, api, boundedList, clock, el, follow, say, tokenButton } from './common.js';

const PAGE = 50;
let offset = 0;
let total = 0;
let searching = null;
let open = null;          // the RID shown
let schema = {};          // field path -> FieldSchema

function recordLink(hashId) {
  return el('a', { href: `#${hashId}`, class: 'row', 'data-rid': hashId }, hashId);
}

function listRows(items) {
  $('#list tbody').replaceChildren(...items.map((it) => el('tr', { class: it.hashId === open ? 'chosen' : '' },
    el('td', {}, recordLink(it.hashId)), el('td', { class: 'wrap' }, it.title || ''),
    el('td', { class: 'wrap' }, it.fileName || ''), el('td', {}, it.type || ''), el('td', {}, it.year || ''))));
}

let asked = 0;            // the newest listing asked for; older answers are dropped

async function showPage() {
  const mine = ++asked;
  try {
    if (searching) {
      const r = await api('POST', '/api/metadata/search', { body: { ...searching, limit: PAGE } });
      if (mine !== asked) return;
      listRows(r.results.map((h) => ({
        hashId: h.hashId, title: h.metadata.title, fileName: h.metadata.fileName,
        type: h.metadata.type || h.metadata.fileType, year: h.metadata.year,
      })));
      $('#page').textContent = `${r.count} found${r.count === PAGE ? ' (the first ' + PAGE + ')' : ''} of ${r.total}`;
      $('#prev').disabled = true;
      $('#next').disabled = true;
      return;
    }
    const r = await api('GET', `/api/metadata/list?offset=${offset}&limit=${PAGE}`);
    if (mine !== asked) return;
    total = r.total;
    listRows(r.items);
    // For whoever measures the page (bench/benches/console.rs).
    if (performance.getEntriesByName('meta-core:list-shown').length === 0) {
      performance.mark('meta-core:list-shown');
    }
    $('#page').textContent = total ? `${offset + 1}–${offset + r.count} of ${total}` : 'no records';
    $('#prev').disabled = offset === 0;
    $('#next').disabled = offset + r.count >= total;
  } catch (e) {
    say(`list: ${e.message}`, true);
  }
}

/** The field's schema entry: the path as the schema names it. */
function schemaOf(field) {
  if (schema[field]) return schema[field];
  const short = field.replace(/\/[a-z]{2,3}$/, '');
  return schema[short] || {};
}

/** An input for `value` chosen by the schema's hint or type. */
function editorFor(field, value) {
  const s = schemaOf(field);
  if (s.hint === 'timestamp' && /^\d{10,13}$/.test(value)) {
    const ms = value.length > 11 ? Number(value) : Number(value) * 1000;
    const input = el('input', { type: 'datetime-local', step: '1', value: new Date(ms - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 19) });
    input.toValue = () => {
      const t = new Date(input.value).getTime();
      return String(value.length > 11 ? t : Math.floor(t / 1000));
    };
    return input;
  }
  if (s.hint === 'timestamp') {
    const input = el('input', { type: 'text', value, pattern: '\\d{4}-\\d{2}-\\d{2}.*', title: 'RFC 3339 or YYYY-MM-DD' });
    input.toValue = () => input.value;
    return input;
  }
  if (s.type === 'bool') {
    const input = el('select', {}, el('option', { selected: value === 'true' }, 'true'), el('option', { selected: value === 'false' }, 'false'));
    input.toValue = () => input.value;
    return input;
  }
  if (s.type === 'int' || s.type === 'float') {
    const input = el('input', { type: 'number', step: s.type === 'int' ? '1' : 'any', value });
    input.toValue = () => input.value;
    return input;
  }
  if (s.type === 'json-object' || s.type === 'json-array') {
    let pretty = value;
    try { pretty = JSON.stringify(JSON.parse(value), null, 2); } catch { /* as it is */ }
    const input = el('textarea', {}, pretty);
    input.toValue = () => JSON.stringify(JSON.parse(input.value));
    return input;
  }
  const input = el('input', { type: 'text', value, size: 40, spellcheck: s.hint === 'cid' ? 'false' : 'true', 'data-hint': s.hint || '' });
  input.toValue = () => input.value;
  return input;
}

async function saveField(field, value) {
  if (value === '') {
    throw new Error('a field cannot be empty: delete it instead');
  }
  await api('PUT', `/meta/${encodeURIComponent(open)}/${field.split('/').map(encodeURIComponent).join('/')}`, { body: { value } });
}

function fieldRow(field, value) {
  const shown = el('td', { class: 'wrap', 'data-value': field }, value);
  const row = el('tr', { 'data-field': field }, el('td', { class: 'wrap' }, field), shown);
  const edit = el('button', { type: 'button' }, 'edit');
  const del = el('button', { type: 'button' }, 'delete');
  edit.addEventListener('click', () => {
    const input = editorFor(field, value);
    const save = el('button', { type: 'button' }, 'save');
    save.addEventListener('click', async () => {
      try {
        await saveField(field, input.toValue());
        say(`${field} saved`);
        openRecord(open);
      } catch (e) {
        say(`${field}: ${e.message}`, true);
      }
    });
    shown.replaceChildren(input, ' ', save);
    input.focus();
  });
  del.addEventListener('click', async () => {
    if (!confirm(`Delete ${field}?`)) return;
    try {
      await api('DELETE', `/meta/${encodeURIComponent(open)}/${field.split('/').map(encodeURIComponent).join('/')}`);
      say(`${field} deleted`);
      openRecord(open);
    } catch (e) {
      say(`${field}: ${e.message}`, true);
    }
  });
  row.append(el('td', {}, edit, ' ', del));
  return row;
}

async function showCids(fields) {
  const cids = Object.keys(fields).filter((k) => k.startsWith('cids/')).map((k) => k.slice(5));
  const box = $('#cids');
  if (cids.length === 0) {
    box.replaceChildren(el('dt', {}, 'cids'), el('dd', {}, 'none'));
    return;
  }
  try {
    const doc = await api('GET', `/api/meta/${encodeURIComponent(cids[0])}`);
    box.replaceChildren(
      el('dt', {}, 'cids'), el('dd', {}, doc.cids.join(', ')),
      el('dt', {}, 'canonical_cid'), el('dd', { 'data-field': 'canonical_cid' }, doc.canonical_cid ?? '—'),
      el('dt', {}, 'duplicates'), el('dd', {}, doc.duplicates.length ? doc.duplicates.join(', ') : 'none'));
  } catch (e) {
    box.replaceChildren(el('dt', {}, 'cids'), el('dd', {}, `${cids.join(', ')} (${e.message})`));
  }
}

async function openRecord(rid) {
  open = rid;
  try {
    const [flat, nested] = await Promise.all([
      api('GET', `/meta/${encodeURIComponent(rid)}`),
      api('GET', `/meta/${encodeURIComponent(rid)}?shape=nested`),
    ]);
    $('#record-title').textContent = rid;
    const fields = flat.metadata;
    $('#fields tbody').replaceChildren(...Object.keys(fields).sort().map((k) => fieldRow(k, fields[k])));
    $('#nested-view').textContent = JSON.stringify(nested.metadata, null, 2);
    $('#add').hidden = false;
    $('#delete-record').hidden = false;
    for (const tr of document.querySelectorAll('#list tbody tr')) {
      tr.classList.toggle('chosen', tr.querySelector('a')?.dataset.rid === rid);
    }
    showCids(fields);
  } catch (e) {
    say(`${rid}: ${e.message}`, true);
    $('#record-title').textContent = `${rid}: ${e.message}`;
    $('#fields tbody').replaceChildren();
  }
}

// The key tree, S3-style by prefix.
async function browse(prefix) {
  try {
    const r = await api('GET', `/api/kv/tree?prefix=${encodeURIComponent(prefix)}&delimiter=/&max=200`);
    const crumbs = [el('button', { type: 'button', onclick: () => browse('') }, '(all)')];
    let at = '';
    for (const part of prefix.split('/').filter(Boolean)) {
      at += `${part}/`;
      const to = at;
      crumbs.push(el('button', { type: 'button', onclick: () => browse(to) }, part));
    }
    $('#crumbs').replaceChildren(...crumbs);
    $('#kv').replaceChildren(
      ...r.branches.map((b) => el('li', {}, el('button', { type: 'button', onclick: () => browse(b) }, b.slice(prefix.length) || b))),
      ...r.leaves.map((k) => el('li', {}, el('a', { href: '#', class: 'row', onclick: (ev) => { ev.preventDefault(); showKey(k); } }, k.slice(prefix.length) || k))),
      r.hasMore ? el('li', {}, '…more (narrow the prefix)') : null);
  } catch (e) {
    say(`keys: ${e.message}`, true);
  }
}

async function showKey(key) {
  try {
    const v = await api('GET', `/api/kv/value?key=${encodeURIComponent(key)}`);
    $('#kv-value').textContent = `${v.key}\n\n${v.value}`;
    const m = /^file:([^/]+)\//.exec(key);
    if (m) openRecord(m[1]);
  } catch (e) {
    say(`${key}: ${e.message}`, true);
  }
}

// The events of the record shown: every change this page (or anyone) makes.
const addEvent = boundedList($('#record-events'), 100);
follow('/api/events/meta', {
  onState: (s, why) => { const st = $('#events-state'); st.textContent = why ? `${s}: ${why}` : s; st.className = `state ${s}`; },
  onEvent: (ev) => {
    try {
      const d = JSON.parse(ev.data);
      if (open && d.key.startsWith(`file:${open}/`)) {
        addEvent(el('li', { 'data-event': ev.event }, el('span', { class: 'kind' }, ev.event), `${d.key} ${clock(d.ts)}`));
      }
    } catch { /* not a meta event */ }
  },
});

$('#search').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const query = String(f.get('query') || '').trim();
  const property = String(f.get('property') || '').trim();
  const value = String(f.get('value') || '').trim();
  searching = { query };
  if (property && value) searching.filters = [{ property, values: [value], exact: f.get('exact') === 'on' }];
  showPage();
});
$('#clear').addEventListener('click', () => { searching = null; offset = 0; $('#search').reset(); showPage(); });
$('#prev').addEventListener('click', () => { offset = Math.max(0, offset - PAGE); showPage(); });
$('#next').addEventListener('click', () => { offset += PAGE; showPage(); });
$('#nested').addEventListener('change', (ev) => {
  $('#nested-view').hidden = !ev.target.checked;
  $('#fields').hidden = ev.target.checked;
});
$('#add').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  try {
    await saveField(String(f.get('field')).trim(), String(f.get('value')));
    ev.target.reset();
    openRecord(open);
  } catch (e) {
    say(`add: ${e.message}`, true);
  }
});
$('#delete-record').addEventListener('click', async () => {
  if (!open || !confirm(`Delete the record ${open} and all its fields?`)) return;
  try {
    await api('DELETE', `/meta/${encodeURIComponent(open)}`);
    say(`${open} deleted`);
    open = null;
    $('#fields tbody').replaceChildren();
    $('#record-title').textContent = 'No record open';
    showPage();
  } catch (e) {
    say(`delete: ${e.message}`, true);
  }
});
window.addEventListener('hashchange', () => { const rid = location.hash.slice(1); if (rid) openRecord(rid); });

tokenButton();
api('GET', '/api/schema').then((s) => { schema = s.fields; }).catch(() => { /* editors fall back to text */ });
showPage();
browse('');
if (location.hash.length > 1) openRecord(location.hash.slice(1));
