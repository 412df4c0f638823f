// The dashboard: the supervisor's daemon table, the store's figures,
// mounts and watchers, the live event feeds and a daemon's log tail.
'use strict';
import { $, api, boundedList, bytes, clock, duration, el, follow, say, token, tokenButton } from './common.js';

const FEED_ROWS = 200;
const LOG_LINES = 500;

function cell(text, cls) {
  return el('td', { class: cls }, text ?? '—');
}

async function restart(name) {
  try {
    say(`restarting ${name}…`);
    await api('POST', `/api/daemons/${encodeURIComponent(name)}/restart`, { admin: true });
    say(`${name} restarted`);
  } catch (e) {
    say(`restart ${name}: ${e.message}`, true);
  }
  refresh();
}

async function stopTree() {
  if (!confirm('Stop meta-core? Every daemon stops, this page loses its server.')) return;
  try {
    await api('POST', '/api/tree/stop', { admin: true });
    say('meta-core is stopping');
  } catch (e) {
    say(`stop: ${e.message}`, true);
  }
}

function daemonRow(d) {
  const admin = Boolean(token());
  const button = el('button', {
    type: 'button', 'data-restart': d.name, disabled: !admin,
    title: admin ? '' : 'needs the admin token', onclick: () => restart(d.name),
  }, 'restart');
  return el('tr', { 'data-daemon': d.name },
    cell(d.name),
    cell(d.state, d.state),
    cell(d.pid),
    cell(d.ready ? 'yes' : 'no', d.ready ? 'ok' : 'bad'),
    cell(duration(d.uptimeMs)),
    el('td', { class: 'restarts' }, String(d.restarts)),
    el('td', { class: 'wrap' }, d.lastExit ? `${d.lastExit.reason} (${clock(d.lastExit.at)})` : '—'),
    el('td', { class: 'wrap bad' }, d.degraded || ''),
    el('td', {}, button));
}

function summary(status) {
  const sup = status.supervisor;
  const rows = [
    ['service', `${status.serviceName} ${status.version}`],
    ['status', status.status],
    ['role', sup ? sup.role : 'no supervisor'],
    ['leader', sup?.leaderUrl || status.leader?.apiUrl || '—'],
    ['kv-leader.info', status.leader ? `${status.leader.hostname}, pid ${status.leader.pid}, ${status.leader.apiUrl}` : '—'],
    ['up', duration(status.uptimeSeconds * 1000)],
  ];
  $('#summary').replaceChildren(...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { 'data-field': k }, v)]));
}

async function refresh() {
  try {
    const status = await api('GET', '/status', { admin: Boolean(token()) });
    summary(status);
    const daemons = status.supervisor?.daemons || [];
    $('#daemons tbody').replaceChildren(...daemons.map(daemonRow));
    $('#stop-tree').disabled = !token() || !status.supervisor;
    // For whoever measures the page (bench/benches/console.rs).
    if (performance.getEntriesByName('meta-core:tree-shown').length === 0) {
      performance.mark('meta-core:tree-shown');
    }
    const w = status.watcher;
    const m = status.mounts;
    $('#watchers').replaceChildren(
      el('h3', {}, 'watcher'),
      w ? el('p', {}, `${w.enabled ? 'enabled' : 'disabled'}; ${w.knownFiles} files known, ${w.announced} announced, ${w.pending} pending, ${w.refused} refused`) : el('p', {}, 'watcherd does not answer'));
    $('#mounts').replaceChildren(el('h3', {}, 'mounts'),
      el('p', {}, m ? `rclone ${m.rclone.state}; ${m.mounts} mounts configured${token() ? '' : ' (their list needs the admin token)'}` : 'mountd does not answer'));
    say(`updated ${new Date().toLocaleTimeString()}`);
  } catch (e) {
    say(`status: ${e.message}`, true);
  }
}

async function refreshStats() {
  try {
    const s = await api('GET', '/api/stats');
    const rows = [['records', s.records], ['keys', s.redisKeys], ['database', bytes(s.redisMemory)]];
    if (s.files) rows.push(['files', JSON.stringify(s.files)]);
    $('#stats').replaceChildren(...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { 'data-field': k }, v)]));
  } catch (e) {
    say(`stats: ${e.message}`, true);
  }
}

async function refreshAdminViews() {
  if (!token()) {
    $('#mount-list').replaceChildren();
    $('#watcher-list').replaceChildren();
    return;
  }
  try {
    const [{ mounts }, watchers] = await Promise.all([
      api('GET', '/api/mounts', { admin: true }),
      api('GET', '/api/watchers', { admin: true }),
    ]);
    const mountRow = (m) => el('tr', {},
      cell(m.name), cell(m.type),
      cell(m.mounted ? 'mounted' : 'not mounted', m.mounted ? 'ok' : ''),
      el('td', { class: 'wrap bad' }, m.error || m.lastScanError || ''));
    const watcherRow = (w) => el('tr', {},
      cell(w.path), cell(w.active ? 'active' : 'inactive', w.active ? 'ok' : ''),
      cell(`${w.fileCount} files`),
      cell(w.isScanning ? 'scanning' : (w.lastScan ? `scanned ${clock(w.lastScan)}` : '')));
    const table = (rows) => el('table', {}, el('tbody', {}, ...rows));
    $('#mount-list').replaceChildren(mounts.length ? table(mounts.map(mountRow)) : el('p', {}, 'no mounts'));
    const list = Array.isArray(watchers) ? watchers : (watchers.watchers || []);
    $('#watcher-list').replaceChildren(list.length ? table(list.map(watcherRow)) : el('p', {}, 'no watchers'));
  } catch (e) {
    say(`mounts and watchers: ${e.message}`, true);
  }
}

function feed(path, list, state) {
  const add = boundedList(list, FEED_ROWS);
  follow(path, {
    onEvent: (ev) => {
      let text = ev.data;
      try {
        const d = JSON.parse(ev.data);
        text = d.key ?? d.path ?? ev.data;
        if (d.oldPath) text = `${d.oldPath} → ${d.path}`;
      } catch { /* keep the raw data */ }
      add(el('li', { 'data-event': ev.event, title: ev.id || '' }, el('span', { class: 'kind' }, ev.event), text));
    },
    onState: (s, why) => { state.textContent = why ? `${s}: ${why}` : s; state.className = `state ${s}`; },
  });
}

let logStream = null;
function followLog() {
  logStream?.abort();
  const lines = $('#log-lines');
  lines.replaceChildren();
  const state = $('#log-state');
  if (!token()) {
    state.textContent = 'the logs need the admin token';
    return;
  }
  logStream = new AbortController();
  const name = $('#log-daemon').value;
  follow(`/api/logs/${encodeURIComponent(name)}`, {
    admin: true,
    signal: logStream.signal,
    onEvent: (ev) => {
      let line = ev.data;
      try { line = JSON.parse(ev.data).line; } catch { /* as sent */ }
      lines.append(`${line}\n`);
      while (lines.childNodes.length > LOG_LINES) lines.firstChild.remove();
      lines.scrollTop = lines.scrollHeight;
    },
    onState: (s, why) => {
      // Each connect sends the last lines again: start the view over.
      if (s === 'live') lines.replaceChildren();
      state.textContent = why ? `${s}: ${why}` : s;
    },
  });
}

tokenButton();
$('#stop-tree').addEventListener('click', stopTree);
window.addEventListener('token-changed', () => { refresh(); refreshAdminViews(); followLog(); });
$('#log-daemon').addEventListener('change', followLog);
refresh();
refreshStats();
refreshAdminViews();
setInterval(refresh, 2000);
setInterval(refreshStats, 5000);
setInterval(refreshAdminViews, 10000);
feed('/api/events/meta', $('#meta-feed'), $('#meta-state'));
feed('/api/events/files', $('#files-feed'), $('#files-state'));
followLog();
