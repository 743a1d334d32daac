// The Ferry admin console: one page, hash routes, every datum from the admin API.
// Data is only ever put into the page as text (textContent, text nodes, attribute values set
// with setAttribute on our own attributes): never as HTML.
'use strict';
(function () {
  const API = '/api/admin/v1';
  const TOKEN_KEY = 'ferry.adminToken';
  const POLL_MS = 2000;
  const SPARK_POINTS = 60;
  const SYNC_LOG_KINDS = ['connection_opened', 'connection_closed', 'session_bound', 'session_unbound',
    'subscription_changed', 'upload', 'compensating_write', 'client_reset', 'error', 'data_api', 'sql_write'];

  const $ = (id) => document.getElementById(id);

  // `explained`: the answer carried the API's JSON error (a 404 without one is a route this
  // server does not have; with one, e.g. an unknown user).
  class ApiError extends Error {
    constructor(status, message, explained) { super(message); this.status = status; this.explained = !!explained; }
  }

  // Bumped on every page change and on sign-out: an answer that arrives for an older page is dropped.
  let generation = 0;
  let timers = [];

  // ---- DOM helpers ------------------------------------------------------------------------

  function h(tag, props, ...children) {
    const e = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === 'class') e.className = v;
        else if (k === 'text') e.textContent = String(v);
        else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? '' : String(v));
      }
    }
    append(e, children);
    return e;
  }

  function append(parent, children) {
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      parent.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return parent;
  }

  function code(text) { return h('code', null, String(text)); }

  function fmtTime(iso) {
    if (iso === undefined || iso === null || iso === '') return '—';
    const d = new Date(iso);
    if (isNaN(d.getTime())) return String(iso);
    return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace(/Z$/, ' UTC');
  }

  function fmtAgo(iso) {
    const d = new Date(iso);
    if (isNaN(d.getTime())) return '';
    let s = Math.max(0, Math.round((Date.now() - d.getTime()) / 1000));
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min';
    if (s < 86400) return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
    return Math.floor(s / 86400) + ' d';
  }

  function fmtNum(n) {
    if (typeof n !== 'number' || !isFinite(n)) return '—';
    return n.toLocaleString('en-US');
  }

  function fmtRate(n) {
    if (typeof n !== 'number' || !isFinite(n)) return '—';
    return n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US');
  }

  function fmtBytes(n) {
    if (typeof n !== 'number' || !isFinite(n)) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(Math.round(n)) : n.toFixed(1)) + ' ' + units[i];
  }

  function fmtValue(v) {
    if (v === undefined || v === null) return '—';
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    if (typeof v === 'object') return code(JSON.stringify(v));
    return String(v);
  }

  // A table; on a phone each row becomes a card whose cells carry their column's label.
  function table(columns, rows, props) {
    const head = h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col' }, c.label))));
    const body = h('tbody');
    for (const row of rows) body.append(tableRow(columns, row));
    return h('div', { class: 'table-wrap' }, h('table', Object.assign({ class: 'stack' }, props || {}), head, body));
  }

  function tableRow(columns, row) {
    return h('tr', null, columns.map((c) => h('td', { 'data-label': c.label, class: c.cls }, h('div', null, c.value(row)))));
  }

  function unavailable(endpoint, extra) {
    return h('p', { class: 'unavailable', 'data-unavailable': endpoint },
      'Not available on this server: ', code(endpoint), ' answered 404 (this ferry-server does not have it yet).',
      extra ? [' ', extra] : null);
  }

  function errorBox(e) {
    return h('p', { class: 'error', role: 'alert' }, describe(e));
  }

  function describe(e) {
    if (e instanceof ApiError) {
      if (e.status === 0) return e.message;
      return 'The server answered ' + e.status + (e.message ? ': ' + e.message : '');
    }
    return String(e && e.message ? e.message : e);
  }

  let toastTimer = null;
  function toast(message, bad) {
    const t = $('toast');
    t.textContent = message;
    t.className = 'toast' + (bad ? ' bad' : '');
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.hidden = true; }, 6000);
  }

  function sparkline(values) {
    const ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('viewBox', '0 0 ' + (SPARK_POINTS - 1) + ' 20');
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('aria-hidden', 'true');
    // A baseline across the whole chart: the history fills it from the right, 2 s a point.
    const base = document.createElementNS(ns, 'line');
    for (const [k, v] of [['x1', 0], ['x2', SPARK_POINTS - 1], ['y1', 19.5], ['y2', 19.5]]) base.setAttribute(k, String(v));
    svg.append(base);
    const finite = values.filter((v) => typeof v === 'number' && isFinite(v));
    if (finite.length > 1) {
      const max = Math.max(1, ...finite);
      const start = SPARK_POINTS - values.length;
      const points = values.map((v, i) => (start + i) + ',' + (19 - (isFinite(v) ? v : 0) / max * 18).toFixed(2));
      const line = document.createElementNS(ns, 'polyline');
      line.setAttribute('points', points.join(' '));
      svg.append(line);
    }
    return svg;
  }

  // ---- The admin API ----------------------------------------------------------------------

  function token() {
    try { return sessionStorage.getItem(TOKEN_KEY); } catch (e) { return null; }
  }

  async function api(method, path, query) {
    const t = token();
    if (!t) { refuse(401, null); throw new ApiError(401, 'not signed in'); }
    let url = API + '/' + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
      const s = q.toString();
      if (s) url += '?' + s;
    }
    let response;
    try {
      response = await fetch(url, {
        method, cache: 'no-store', credentials: 'omit', redirect: 'error',
        headers: { 'Authorization': 'Bearer ' + t, 'Accept': 'application/json' },
      });
    } catch (e) {
      throw new ApiError(0, 'The server did not answer (' + (e && e.message ? e.message : e) + ').');
    }
    if (response.status === 401 || response.status === 403) {
      const failure = await failureOf(response);
      refuse(response.status, failure.message);
      throw failure;
    }
    if (!response.ok) throw await failureOf(response);
    if (response.status === 204) return null;
    const text = await response.text();
    if (!text) return null;
    try { return JSON.parse(text); } catch (e) { throw new ApiError(response.status, 'the answer is not JSON'); }
  }

  async function failureOf(response) {
    try {
      const body = await response.json();
      if (body && typeof body.error === 'string') return new ApiError(response.status, body.error, true);
    } catch (e) { /* no JSON body */ }
    return new ApiError(response.status, response.statusText || '', false);
  }

  function missingRoute(e) { return e instanceof ApiError && e.status === 404 && !e.explained; }

  // GET that answers null when the server does not have the endpoint (404).
  async function optional(path, query) {
    try { return await api('GET', path, query); } catch (e) {
      if (missingRoute(e)) return null;
      throw e;
    }
  }

  // ---- Sign-in and sign-out ---------------------------------------------------------------

  // The token was refused (401) or the admin API is off (403): forget the token, drop every
  // datum on the page, and say why on the sign-in form.
  function refuse(status, serverMessage) {
    try { sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* storage off */ }
    generation++;
    stopTimers();
    $('main').replaceChildren();
    $('sync-pill').textContent = '';
    $('shell').hidden = true;
    $('signin').hidden = false;
    const box = $('signin-error');
    if (status === 401 && serverMessage === null) { box.hidden = true; box.textContent = ''; return; }
    if (status === 403) {
      box.textContent = 'The admin API is disabled on this server (403). It is enabled only when ferry-server ' +
        'is started with the FERRY_ADMIN_TOKEN secret set.';
    } else {
      box.textContent = 'The admin token was refused (401). Check that it is exactly the server\'s ' +
        'FERRY_ADMIN_TOKEN secret. Nothing is shown without a valid token.';
    }
    box.hidden = false;
    $('signin-token').focus();
  }

  async function signIn(event) {
    event.preventDefault();
    const input = $('signin-token');
    const value = input.value.trim();
    if (!value) return;
    try { sessionStorage.setItem(TOKEN_KEY, value); } catch (e) {
      showSigninError('This browser does not allow session storage, which the console needs to keep the token.');
      return;
    }
    $('signin-submit').disabled = true;
    try {
      await api('GET', 'sync');
    } catch (e) {
      if (e.status !== 401 && e.status !== 403) {
        try { sessionStorage.removeItem(TOKEN_KEY); } catch (x) { /* storage off */ }
        showSigninError(describe(e));
      }
      return;
    } finally {
      $('signin-submit').disabled = false;
    }
    input.value = '';
    $('signin-error').hidden = true;
    showShell();
  }

  function showSigninError(message) {
    const box = $('signin-error');
    box.textContent = message;
    box.hidden = false;
  }

  function signOut() {
    refuse(401, null);
    $('signin-error').hidden = true;
  }

  function showShell() {
    $('signin').hidden = true;
    $('shell').hidden = false;
    if (!location.hash || !pages[parseHash().page]) location.hash = '#/dashboard';
    else route();
  }

  // ---- Routing ----------------------------------------------------------------------------

  function parseHash() {
    const raw = location.hash.replace(/^#\/?/, '');
    const q = raw.indexOf('?');
    const page = (q < 0 ? raw : raw.slice(0, q)) || 'dashboard';
    const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
    return { page, params };
  }

  function hashFor(page, params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    const s = q.toString();
    return '#/' + page + (s ? '?' + s : '');
  }

  function stopTimers() {
    for (const t of timers) clearTimeout(t);
    timers = [];
  }

  function route() {
    if (!token()) { refuse(401, null); return; }
    generation++;
    stopTimers();
    const { page, params } = parseHash();
    const render = pages[page];
    if (!render) { location.hash = '#/dashboard'; return; }
    for (const a of document.querySelectorAll('#nav a')) {
      const on = a.getAttribute('data-page') === page;
      a.classList.toggle('active', on);
      if (on) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    setNav(false);
    $('toast').hidden = true;  // an action's result belongs to the page it was taken on
    const main = $('main');
    main.replaceChildren();
    main.setAttribute('data-page', page);
    const gen = generation;
    const ctx = {
      params,
      main,
      alive: () => gen === generation,
      // Runs fn now and then every `ms` after it finished, while this page is shown.
      every(ms, fn) {
        const tick = async () => {
          if (!ctx.alive()) return;
          try { await fn(); } catch (e) { if (ctx.alive()) ctx.problem(e); }
          if (ctx.alive()) timers.push(setTimeout(tick, ms));
        };
        return tick();
      },
      problem(e) {
        if (e instanceof ApiError && (e.status === 401 || e.status === 403)) return;
        let box = main.querySelector('.page-problem');
        if (!box) { box = h('div', { class: 'page-problem' }); main.prepend(box); }
        box.replaceChildren(errorBox(e));
      },
      clearProblem() {
        const box = main.querySelector('.page-problem');
        if (box) box.replaceChildren();
      },
    };
    Promise.resolve().then(() => render(ctx)).catch((e) => { if (ctx.alive()) ctx.problem(e); });
  }

  function setNav(open) {
    $('nav').classList.toggle('open', open);
    $('nav-toggle').setAttribute('aria-expanded', open ? 'true' : 'false');
  }

  function pageHead(ctx, title, ...extra) {
    const head = h('div', { class: 'page-head' }, h('h1', null, title), extra);
    ctx.main.append(head, h('div', { class: 'page-problem' }));
    return head;
  }

  function updatedStamp() {
    return h('span', { class: 'updated', 'aria-live': 'off' });
  }

  function stamp(el) {
    el.textContent = 'updated ' + new Date().toISOString().slice(11, 19) + ' UTC';
  }

  // "enabled", "paused" or "terminated" (servers before pause and resume send only sync_enabled).
  function syncStateOf(status) {
    return status.state || (status.sync_enabled ? 'enabled' : 'terminated');
  }

  function showSyncState(state) {
    const pill = $('sync-pill');
    pill.textContent = 'sync ' + state;
    pill.className = 'pill ' + (state === 'enabled' ? 'ok' : state === 'paused' ? 'warn' : 'bad');
  }

  // Asks before an action; resolves true when the operator confirmed.
  function confirmAction(title, paragraphs, okLabel, danger) {
    const dialog = $('confirm-dialog');
    $('confirm-title').textContent = title;
    $('confirm-text').replaceChildren(...paragraphs.map((p) => h('p', null, p)));
    const ok = $('confirm-ok');
    ok.textContent = okLabel;
    ok.className = danger ? 'danger' : 'primary';
    dialog.returnValue = '';
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
      dialog.showModal();
      $('confirm-cancel').focus();
    });
  }

  // ---- Dashboard --------------------------------------------------------------------------

  async function dashboard(ctx) {
    const updated = updatedStamp();
    pageHead(ctx, 'Dashboard', updated);
    const names = [
      ['sync', 'Sync'], ['connections', 'Connections'], ['sessions', 'Sessions'],
      ['uploads', 'Uploads / s'], ['downloads', 'Downloads / s'],
      ['compensating', 'Compensating writes'], ['resets', 'Client resets'], ['bootstraps', 'Bootstraps'],
    ];
    const tiles = {};
    const grid = h('div', { class: 'tiles' });
    for (const [key, label] of names) {
      const value = h('div', { class: 'value', text: '…' });
      const sub = h('div', { class: 'sub' });
      const spark = h('div', { class: 'spark' });
      const tile = h('div', { class: 'tile', id: 'tile-' + key }, h('div', { class: 'label' }, label), value, sub, spark);
      tiles[key] = { tile, value, sub, spark, history: [] };
      grid.append(tile);
    }
    const note = h('div');
    ctx.main.append(grid, note);

    const set = (key, value, sub, plot) => {
      const t = tiles[key];
      t.value.textContent = value;
      t.sub.textContent = sub || '';
      if (plot !== undefined) {
        t.history.push(plot);
        if (t.history.length > SPARK_POINTS) t.history.shift();
        t.spark.replaceChildren(sparkline(t.history));
      }
    };
    let previous = null;
    let statsMissing = false;
    await ctx.every(POLL_MS, async () => {
      const stats = statsMissing ? null : await optional('stats');
      if (!ctx.alive()) return;
      if (stats) {
        const now = performance.now();
        showSyncState(syncStateOf(stats));
        set('sync', syncStateOf(stats), stats.node ? 'node ' + stats.node : '');
        set('connections', fmtNum(stats.connections), 'WebSocket connections open', stats.connections);
        set('sessions', fmtNum(stats.sessions), 'sessions bound', stats.sessions);
        let up = NaN, down = NaN, upBytes = NaN, downBytes = NaN;
        if (previous) {
          const dt = (now - previous.time) / 1000;
          // A counter that went down means the server restarted: no rate for this interval.
          const rate = (a, b) => (dt > 0 && a >= b ? (a - b) / dt : NaN);
          up = rate(stats.uploads_total, previous.stats.uploads_total);
          down = rate(stats.downloads_total, previous.stats.downloads_total);
          upBytes = rate(stats.upload_bytes_total, previous.stats.upload_bytes_total);
          downBytes = rate(stats.download_bytes_total, previous.stats.download_bytes_total);
        }
        set('uploads', previous ? fmtRate(up) : '…', previous ? fmtBytes(upBytes) + '/s · ' + fmtNum(stats.uploads_total) + ' in all' : 'measuring', previous ? up : undefined);
        set('downloads', previous ? fmtRate(down) : '…', previous ? fmtBytes(downBytes) + '/s · ' + fmtNum(stats.downloads_total) + ' in all' : 'measuring', previous ? down : undefined);
        set('compensating', fmtNum(stats.compensating_writes_total), 'since the server started');
        set('resets', fmtNum(stats.client_resets_total), 'requested since the server started');
        set('bootstraps', fmtNum(stats.bootstraps_total), 'since the server started');
        previous = { time: now, stats };
        note.replaceChildren();
      } else {
        statsMissing = true;
        const status = await api('GET', 'sync');
        const logs = await optional('logs', { limit: 1000 });
        if (!ctx.alive()) return;
        showSyncState(syncStateOf(status));
        set('sync', syncStateOf(status), '');
        set('connections', fmtNum(status.connections), 'WebSocket connections open', status.connections);
        for (const key of ['sessions', 'uploads', 'downloads', 'resets', 'bootstraps']) set(key, '—', 'not available');
        const entries = logs && Array.isArray(logs.entries) ? logs.entries : [];
        const rejected = entries.filter((e) => e.kind === 'compensating_write').length;
        set('compensating', fmtNum(rejected), 'in the event log (last 1,000 entries)');
        if (!note.firstChild) {
          note.append(unavailable('GET ' + API + '/stats',
            'Connections and sync state come from GET sync, compensating writes from the event log; the other figures need a newer server.'));
        }
      }
      ctx.clearProblem();
      stamp(updated);
    });
  }

  // ---- Devices ----------------------------------------------------------------------------

  async function devices(ctx) {
    const updated = updatedStamp();
    pageHead(ctx, 'Devices', updated);
    const body = h('div');
    ctx.main.append(body);
    let missing = false;
    const columns = [
      { label: 'User', value: (d) => userLink(d.user_id) },
      { label: 'Node', value: (d) => fmtValue(d.node) },
      { label: 'Connection', value: (d) => code(d.connection_id) },
      { label: 'Client file', value: (d) => fmtValue(d.client_file) },
      { label: 'SDK', value: (d) => fmtValue(d.sdk), cls: 'wrap' },
      { label: 'Connected since', value: (d) => [fmtTime(d.connected_since), h('div', { class: 'muted' }, fmtAgo(d.connected_since))] },
      { label: 'Bytes up', value: (d) => fmtBytes(d.bytes_up), cls: 'num' },
      { label: 'Bytes down', value: (d) => fmtBytes(d.bytes_down), cls: 'num' },
      { label: 'Sessions', value: (d) => fmtNum(d.sessions), cls: 'num' },
    ];
    await ctx.every(POLL_MS, async () => {
      const answer = missing ? null : await optional('devices');
      if (!ctx.alive()) return;
      if (answer) {
        const list = Array.isArray(answer.devices) ? answer.devices : [];
        body.replaceChildren(
          h('p', { class: 'muted', id: 'device-count' }, list.length === 1 ? '1 device connected' : list.length + ' devices connected'),
          list.length ? table(columns, list, { id: 'devices-table' }) : h('p', { class: 'empty' }, 'No device is connected.'));
      } else {
        missing = true;
        const status = await api('GET', 'sync');
        if (!ctx.alive()) return;
        showSyncState(syncStateOf(status));
        body.replaceChildren(
          unavailable('GET ' + API + '/devices'),
          h('div', { class: 'card' }, h('p', { id: 'device-count' },
            'Sync connections open now: ', h('strong', null, fmtNum(status.connections)), ' (from GET sync).')));
      }
      ctx.clearProblem();
      stamp(updated);
    });
  }

  function userLink(id) {
    if (id === undefined || id === null) return '—';
    return h('a', { href: hashFor('sync-log', { user: id }), title: 'Sync log of this user' }, code(id));
  }

  // ---- Users ------------------------------------------------------------------------------

  async function users(ctx) {
    const filter = h('input', { type: 'search', placeholder: 'Filter by id or identity', 'aria-label': 'Filter users', id: 'users-filter' });
    const refresh = h('button', { type: 'button', text: 'Refresh' });
    pageHead(ctx, 'Users', filter, refresh);
    const body = h('div');
    ctx.main.append(body);
    let list = [];

    const act = async (user, action) => {
      const id = user.id;
      const spec = {
        disable: {
          title: 'Disable user?', ok: 'Disable user', danger: true, method: 'POST', path: 'users/' + encodeURIComponent(id) + '/disable',
          text: ['User ' + id + ' will no longer be able to log in, refresh a session or sync. Their sync connections are closed now on every node (error 401: the device logs the user out).',
            'Their data stays on the server and on their devices. Enable undoes this.'],
          done: 'User ' + id + ' disabled.',
        },
        enable: {
          title: 'Enable user?', ok: 'Enable user', danger: false, method: 'POST', path: 'users/' + encodeURIComponent(id) + '/enable',
          text: ['User ' + id + ' can log in and sync again.'],
          done: 'User ' + id + ' enabled.',
        },
        revoke: {
          title: 'Revoke sessions?', ok: 'Revoke sessions', danger: true, method: 'POST', path: 'users/' + encodeURIComponent(id) + '/revoke-sessions',
          text: ['Every refresh token of user ' + id + ' is revoked, and the access tokens issued to them until now are refused from now on. ' +
            'Their sync connections are closed now on every node (error 401: the device logs the user out); each device must log in again before it can sync.',
            'The user is not disabled and keeps their data.'],
          done: 'Sessions of user ' + id + ' revoked: their devices were logged out.',
        },
        delete: {
          title: 'Delete user?', ok: 'Delete user', danger: true, method: 'DELETE', path: 'users/' + encodeURIComponent(id),
          text: ['User ' + id + ' is deleted with their identities, password, API keys and sessions. Their sync connections are closed now on every node ' +
            '(error 401: the device logs the user out), and no device can log in or sync as this user again.',
            'Objects they wrote stay in the synced data. This cannot be undone.'],
          done: 'User ' + id + ' deleted.',
        },
      }[action];
      if (!(await confirmAction(spec.title, spec.text, spec.ok, spec.danger))) return;
      try {
        await api(spec.method, spec.path);
        toast(spec.done);
      } catch (e) {
        if (missingRoute(e)) toast('Not available on this server: ' + spec.method + ' ' + API + '/' + spec.path + ' answered 404.', true);
        else if (e.status !== 401 && e.status !== 403) toast(describe(e), true);
        if (e.status === 401 || e.status === 403) return;
      }
      if (ctx.alive()) await load();
    };

    const columns = [
      { label: 'User', value: (u) => code(u.id), cls: 'wrap' },
      { label: 'Identities', value: (u) => (Array.isArray(u.identities) && u.identities.length
        ? h('ul', { class: 'chips' }, u.identities.map((i) => h('li', null, String(i.provider_type) + (i.id && i.id !== u.id ? ': ' + String(i.id) : ''))))
        : '—') },
      { label: 'Status', value: (u) => h('span', { class: 'pill ' + (u.disabled ? 'bad' : 'ok') }, u.disabled ? 'disabled' : 'enabled') },
      { label: 'Actions', value: (u) => h('div', { class: 'actions' },
        h('a', { href: hashFor('sync-log', { user: u.id }), class: 'small' }, 'Sync log'),
        h('a', { href: hashFor('rejected', { user: u.id }), class: 'small' }, 'Rejected writes'),
        u.disabled
          ? h('button', { type: 'button', class: 'small', 'data-action': 'enable', onclick: () => act(u, 'enable') }, 'Enable')
          : h('button', { type: 'button', class: 'small', 'data-action': 'disable', onclick: () => act(u, 'disable') }, 'Disable'),
        h('button', { type: 'button', class: 'small', 'data-action': 'revoke', onclick: () => act(u, 'revoke') }, 'Revoke sessions'),
        h('button', { type: 'button', class: 'small', 'data-action': 'delete', onclick: () => act(u, 'delete') }, 'Delete')) },
    ];

    const render = () => {
      const f = filter.value.trim().toLowerCase();
      const shown = f ? list.filter((u) => JSON.stringify(u).toLowerCase().includes(f)) : list;
      body.replaceChildren(
        h('p', { class: 'muted' }, shown.length + ' of ' + list.length + ' user' + (list.length === 1 ? '' : 's')),
        shown.length ? table(columns, shown, { id: 'users-table' }) : h('p', { class: 'empty' }, list.length ? 'No user matches.' : 'No user has logged in yet.'));
    };
    const load = async () => {
      const answer = await api('GET', 'users');
      if (!ctx.alive()) return;
      list = Array.isArray(answer) ? answer : [];
      ctx.clearProblem();
      render();
    };
    filter.addEventListener('input', render);
    refresh.addEventListener('click', () => load().catch((e) => ctx.problem(e)));
    await load();
  }

  // ---- Sync log ---------------------------------------------------------------------------

  // datetime-local values are read as UTC (the API's times are UTC; the page says so).
  function toIso(local) { return local ? new Date(local + 'Z').toISOString() : ''; }
  function toLocalInput(iso) {
    const d = new Date(iso);
    return isNaN(d.getTime()) ? '' : d.toISOString().slice(0, 16);
  }

  // A sync log entry's details, by kind: an upload's per-changeset summary, a rejected write's
  // object, reason and rule, a subscription set's queries, and the facts of the other kinds.
  const DETAIL_LABELS = {
    session: 'Session', client_file: 'Client file', new_client_file: 'New client file', server_version: 'Server version',
    sdk: 'SDK', reason: 'Reason', bytes_up: 'Bytes up', bytes_down: 'Bytes down', version: 'Subscription set', state: 'State',
    error: 'Error', code: 'Error code', trigger: 'Trigger', object_type: 'Object type', primary_key: 'Primary key',
    rule: 'Rule', role: 'Role', lines_omitted: 'Lines left out',
  };

  function detailFacts(d, keys) {
    const dl = h('dl', { class: 'facts detail-facts' });
    for (const k of keys) {
      if (!(k in d)) continue;
      const v = d[k];
      let shown;
      if (k === 'bytes_up' || k === 'bytes_down') shown = fmtBytes(v);
      else if (k === 'rule') shown = ruleText(v);
      else if (k === 'primary_key') shown = code(v);
      else shown = fmtValue(v);
      dl.append(h('dt', null, DETAIL_LABELS[k] || k.replace(/_/g, ' ')), h('dd', null, shown));
    }
    return dl;
  }

  function uploadLines(list) {
    return h('ul', { class: 'detail-lines' }, list.map((l) => (l && 'error' in l
      ? h('li', null, 'client version ' + fmtValue(l.client_version) + ': not decodable: ' + fmtValue(l.error))
      : h('li', null, 'client version ' + fmtValue(l.client_version) + ': ', h('strong', null, String(l.operation).replace(/_/g, ' ')), ' ',
        fmtValue(l.object_type), ' ', code(l.primary_key), l.count > 1 ? ' ×' + fmtNum(l.count) : ''))));
  }

  function queryLines(list) {
    return h('ul', { class: 'detail-lines' }, list.map((q) => (q && 'more' in q
      ? h('li', { class: 'muted' }, 'and ' + fmtNum(q.more) + ' more')
      : h('li', null, h('strong', null, fmtValue(q.name)), ': ', fmtValue(q.object_type), ' where ', code(q.query)))));
  }

  function detailsOf(e) {
    const d = e.details;
    if (!d || typeof d !== 'object' || !Object.keys(d).length) return '—';
    const known = Object.keys(DETAIL_LABELS);
    let summary = 'details';
    const parts = [];
    if (e.kind === 'upload' && Array.isArray(d.changesets)) {
      summary = d.changesets.length === 1 ? '1 line' : d.changesets.length + ' lines';
      parts.push(uploadLines(d.changesets));
      if (d.lines_omitted > 0) parts.push(h('p', { class: 'muted' }, 'and ' + fmtNum(d.lines_omitted) + ' more line(s) left out'));
      parts.push(detailFacts(d, ['session']));
    } else if (e.kind === 'subscription_changed' && Array.isArray(d.queries)) {
      summary = d.queries.length === 1 ? '1 query' : d.queries.length + ' queries';
      parts.push(detailFacts(d, d.error ? ['session', 'version', 'state', 'error'] : ['session', 'version', 'state']));
      parts.push(d.queries.length ? queryLines(d.queries) : h('p', { class: 'muted' }, 'No subscription.'));
    } else if (e.kind === 'compensating_write') {
      summary = 'rejected write';
      // The reason is the entry's message already.
      parts.push(detailFacts(d, d.reason === e.message ? ['object_type', 'primary_key', 'rule', 'role'] : ['object_type', 'primary_key', 'reason', 'rule', 'role']));
    } else {
      parts.push(detailFacts(d, known.filter((k) => k in d)));
    }
    // Whatever else the server sends, as it is.
    const handled = new Set(known.concat(['changesets', 'queries']));
    const rest = Object.keys(d).filter((k) => !handled.has(k));
    if (rest.length) parts.push(h('dl', { class: 'facts detail-facts' }, rest.map((k) => [h('dt', null, k.replace(/_/g, ' ')), h('dd', null, fmtValue(d[k]))])));
    return h('details', { class: 'entry-details', 'data-kind': String(e.kind) }, h('summary', null, summary), parts);
  }

  async function syncLog(ctx) {
    pageHead(ctx, 'Sync log');
    const params = ctx.params;
    const userId = params.get('user') || '';
    const kinds = (params.get('kind') || '').split(',').filter((k) => SYNC_LOG_KINDS.includes(k));
    const since = params.get('since') || '';
    const until = params.get('until') || '';

    const userSelect = h('select', { id: 'log-user', name: 'user', required: true }, h('option', { value: '' }, 'Pick a user…'));
    const kindBoxes = SYNC_LOG_KINDS.map((k) => h('label', null,
      h('input', { type: 'checkbox', name: 'kind', value: k, checked: kinds.includes(k) }), k.replace(/_/g, ' ')));
    const sinceInput = h('input', { type: 'datetime-local', id: 'log-since', value: since ? toLocalInput(since) : '' });
    const untilInput = h('input', { type: 'datetime-local', id: 'log-until', value: until ? toLocalInput(until) : '' });
    const form = h('form', { class: 'card', id: 'log-form' },
      h('div', { class: 'filters' },
        h('div', { class: 'field' }, h('label', { for: 'log-user' }, 'User'), userSelect),
        h('div', { class: 'field' }, h('label', { for: 'log-since' }, 'From (UTC)'), sinceInput),
        h('div', { class: 'field' }, h('label', { for: 'log-until' }, 'Until (UTC)'), untilInput),
        h('button', { type: 'submit', class: 'primary' }, 'Show')),
      h('fieldset', { class: 'kinds' }, h('legend', null, 'Kinds (none ticked: every kind)'), kindBoxes));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const picked = kindBoxes.map((l) => l.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
      location.hash = hashFor('sync-log', {
        user: userSelect.value, kind: picked.join(','), since: toIso(sinceInput.value), until: toIso(untilInput.value),
      });
    });
    const results = h('div', { id: 'log-results' });
    ctx.main.append(form, results);

    const usersAnswer = await api('GET', 'users');
    if (!ctx.alive()) return;
    const ids = (Array.isArray(usersAnswer) ? usersAnswer : []).map((u) => String(u.id));
    if (userId && !ids.includes(userId)) ids.unshift(userId);
    for (const id of ids) userSelect.append(h('option', { value: id, selected: id === userId }, id));
    if (!userId) {
      results.append(h('p', { class: 'empty' }, ids.length ? 'Pick a user to read their sync log.' : 'No user has logged in yet.'));
      return;
    }

    const columns = [
      { label: 'Time', value: (e) => fmtTime(e.time), cls: 'time' },
      { label: 'Kind', value: (e) => h('span', { class: 'pill kind', 'data-kind': String(e.kind) }, String(e.kind).replace(/_/g, ' ')) },
      { label: 'Node', value: (e) => fmtValue(e.node) },
      { label: 'Connection', value: (e) => (e.connection_id === undefined || e.connection_id === null ? '—' : code(e.connection_id)) },
      { label: 'Message', value: (e) => fmtValue(e.message), cls: 'wrap' },
      { label: 'Details', value: detailsOf, cls: 'wrap' },
    ];
    const query = { kind: kinds.join(','), since, until, limit: 50 };
    const first = await optional('users/' + encodeURIComponent(userId) + '/sync-log', query);
    if (!ctx.alive()) return;
    if (first === null) {
      // Older servers: the in-memory event log, this user's entries.
      const logs = await api('GET', 'logs', { limit: 1000 });
      if (!ctx.alive()) return;
      const from = since ? Date.parse(since) : -Infinity, to = until ? Date.parse(until) : Infinity;
      const entries = (logs && Array.isArray(logs.entries) ? logs.entries : [])
        .filter((e) => e.user_id === userId && (!kinds.length || kinds.includes(e.kind)))
        .filter((e) => { const t = Date.parse(e.time); return isNaN(t) || (t >= from && t <= to); })
        .reverse();
      // A rejected write's message, `"Type": { "pk": "reason" }`, as its object and reason.
      const message = { label: 'Message', cls: 'wrap', value: (e) => (e.kind === 'compensating_write'
        ? parseRejected(e).map((r) => h('div', null, String(r.object_type) + ' ', code(r.primary_key), ': ' + String(r.reason)))
        : fmtValue(e.message)) };
      results.append(unavailable('GET ' + API + '/users/:id/sync-log', 'Showing this user\'s entries of the server\'s event log (GET logs) instead.'),
        entries.length ? table([columns[0], columns[1], message], entries, { id: 'log-table' })
          : h('p', { class: 'empty' }, 'No event log entry for this user.'));
      return;
    }
    const list = Array.isArray(first.entries) ? first.entries : [];
    if (!list.length) { results.append(h('p', { class: 'empty' }, 'No sync log entry matches.')); return; }
    const tbl = table(columns, list, { id: 'log-table' });
    const tbody = tbl.querySelector('tbody');
    const more = h('div', { class: 'more' });
    results.append(tbl, more);
    let next = first.next;
    const showMore = () => {
      more.replaceChildren(next === null || next === undefined
        ? h('span', { class: 'muted' }, 'No older entries.')
        : h('button', { type: 'button', id: 'log-older', onclick: older }, 'Older'));
    };
    async function older() {
      try {
        const page = await api('GET', 'users/' + encodeURIComponent(userId) + '/sync-log', Object.assign({}, query, { before: next }));
        if (!ctx.alive()) return;
        for (const e of page && Array.isArray(page.entries) ? page.entries : []) tbody.append(tableRow(columns, e));
        next = page ? page.next : null;
        showMore();
      } catch (e) { ctx.problem(e); }
    }
    showMore();
  }

  // ---- Rejected writes --------------------------------------------------------------------

  // The API's rules (`rule` of a rejected write), as text.
  const RULES = {
    write_filter: ['write filter', 'The role\'s write filter (document_filters.write) refused the write.'],
    query_view: ['query view', 'The object is outside the session\'s subscriptions (its query view).'],
    key_taken: ['primary key taken', 'A create of a primary key another user\'s object holds.'],
  };
  function ruleText(rule) {
    if (rule === undefined || rule === null || rule === '') return '—';
    return RULES[rule] ? RULES[rule][0] : String(rule).replace(/_/g, ' ');
  }

  // The rule and role an event-log reason names (older servers): "…denied by write filter in
  // role "r"", "…already in use…" or "…outside of the current query view".
  function ruleOf(reason) {
    const role = /denied by write filter in role "(.*)"\s*$/.exec(reason);
    if (role) return { rule: 'write_filter', role: role[1] };
    if (/already in use/.test(reason)) return { rule: 'key_taken', role: null };
    if (/outside of the current query view/.test(reason)) return { rule: 'query_view', role: null };
    return { rule: null, role: null };
  }

  // An event-log message `"Type": { "pk": "reason" }` as rows; the raw message when it does not parse.
  function parseRejected(entry) {
    try {
      const parsed = JSON.parse('{' + entry.message + '}');
      const rows = [];
      for (const [type, objects] of Object.entries(parsed)) {
        for (const [pk, reason] of Object.entries(objects)) {
          rows.push(Object.assign({ time: entry.time, user_id: entry.user_id, object_type: type, primary_key: pk, reason: String(reason) }, ruleOf(String(reason))));
        }
      }
      if (rows.length) return rows;
    } catch (e) { /* shown raw */ }
    return [Object.assign({ time: entry.time, user_id: entry.user_id, object_type: '—', primary_key: '—', reason: entry.message }, ruleOf(String(entry.message)))];
  }

  async function rejected(ctx) {
    const updated = updatedStamp();
    const userFilter = h('input', { type: 'search', id: 'rejected-user', placeholder: 'User id (all users)', 'aria-label': 'User id', value: ctx.params.get('user') || '' });
    const filterForm = h('form', { class: 'filters' }, userFilter, h('button', { type: 'submit' }, 'Filter'));
    filterForm.addEventListener('submit', (event) => {
      event.preventDefault();
      location.hash = hashFor('rejected', { user: userFilter.value.trim() });
    });
    pageHead(ctx, 'Rejected writes', filterForm, updated);
    const user = ctx.params.get('user') || '';
    const body = h('div');
    ctx.main.append(h('p', { class: 'muted' }, 'Writes the server reverted (compensating writes), newest first, with the reason the device was sent and the rule that rejected the write.'), body);
    const columns = [
      { label: 'Time', value: (r) => fmtTime(r.time) },
      { label: 'User', value: (r) => userLink(r.user_id) },
      { label: 'Object type', value: (r) => fmtValue(r.object_type) },
      { label: 'Primary key', value: (r) => code(r.primary_key === undefined || r.primary_key === null ? '—' : r.primary_key), cls: 'break' },
      { label: 'Reason', value: (r) => fmtValue(r.reason), cls: 'wrap reason' },
      { label: 'Rule', value: (r) => h('span', { 'data-rule': r.rule || '', title: RULES[r.rule] ? RULES[r.rule][1] : null }, ruleText(r.rule)), cls: 'nowrap' },
      { label: 'Role', value: (r) => fmtValue(r.role), cls: 'break' },
    ];
    let missing = false;
    let pagedOlder = false;  // once older pages are shown, the first page stops refreshing under the reader
    let tbody = null, more = null, next = null;

    const showMore = () => {
      if (!more) return;
      more.replaceChildren(next === null || next === undefined
        ? h('span', { class: 'muted' }, 'No older rejected writes.')
        : h('button', { type: 'button', id: 'rejected-older', onclick: older }, 'Older'));
    };
    async function older() {
      try {
        const page = await api('GET', 'rejected-writes', { limit: 50, before: next, user });
        if (!ctx.alive()) return;
        pagedOlder = true;
        for (const r of page && Array.isArray(page.entries) ? page.entries : []) tbody.append(tableRow(columns, r));
        next = page ? page.next : null;
        showMore();
      } catch (e) { ctx.problem(e); }
    }

    let shown = null;  // what the table shows: it is rebuilt only when that changes
    await ctx.every(POLL_MS, async () => {
      if (pagedOlder) return;
      const page = missing ? null : await optional('rejected-writes', { limit: 50, user });
      if (!ctx.alive() || pagedOlder) return;
      const key = JSON.stringify(page);
      if (page && key === shown) { stamp(updated); return; }
      shown = page ? key : null;
      if (page) {
        const list = Array.isArray(page.entries) ? page.entries : [];
        if (!list.length) { body.replaceChildren(h('p', { class: 'empty', id: 'rejected-empty' }, 'No rejected write.')); tbody = null; more = null; }
        else {
          const tbl = table(columns, list, { id: 'rejected-table' });
          tbody = tbl.querySelector('tbody');
          more = h('div', { class: 'more' });
          next = page.next;
          body.replaceChildren(tbl, more);
          showMore();
        }
      } else {
        missing = true;
        const logs = await api('GET', 'logs', { limit: 1000 });
        if (!ctx.alive()) return;
        const rows = (logs && Array.isArray(logs.entries) ? logs.entries : [])
          .filter((e) => e.kind === 'compensating_write' && (!user || e.user_id === user))
          .reverse().flatMap(parseRejected);
        body.replaceChildren(
          unavailable('GET ' + API + '/rejected-writes', 'Showing the compensating writes of the server\'s event log (GET logs, the last 1,000 entries) instead.'),
          rows.length ? table(columns, rows, { id: 'rejected-table' })
            : h('p', { class: 'empty', id: 'rejected-empty' }, 'No rejected write.'));
      }
      ctx.clearProblem();
      stamp(updated);
    });
  }

  // ---- Triggers ---------------------------------------------------------------------------

  // Each trigger of the app with its delivery state (GET triggers); a paused one can be resumed.
  async function triggers(ctx) {
    const updated = updatedStamp();
    pageHead(ctx, 'Triggers', updated);
    const body = h('div');
    ctx.main.append(
      h('p', { class: 'muted' }, 'Database triggers POST each matching change to a webhook, in order, at least once (docs/backend.md). ' +
        'After too many failures in a row a trigger pauses; resuming delivers again from the change that failed.'),
      body);
    const stateOf = (t) => t.disabled ? 'disabled' : !t.started ? 'not started' : t.paused ? 'paused' : 'delivering';
    const resume = async (t) => {
      const ok = await confirmAction('Resume trigger ' + t.name + '?', [
        'The trigger delivers again from its cursor, starting with the change that failed, and its failures are reset.',
        'Last error: ' + (t.last_error || 'none') + '.',
      ], 'Resume', false);
      if (!ok || !ctx.alive()) return;
      try {
        await api('POST', 'triggers/' + encodeURIComponent(t.name) + '/resume');
        toast('Trigger ' + t.name + ' resumed.');
      } catch (e) { if (e.status !== 401 && e.status !== 403) toast(describe(e), true); }
    };
    const columns = [
      { label: 'Trigger', value: (t) => [code(t.name), h('div', { class: 'muted' }, fmtValue(t.class))] },
      { label: 'Changes', value: (t) => [(Array.isArray(t.operation_types) ? t.operation_types : []).join(', '),
        t.match ? h('div', { class: 'muted' }, 'where ', code(t.match)) : ''], cls: 'wrap' },
      { label: 'Webhook', value: (t) => fmtValue(t.url), cls: 'wrap' },
      { label: 'State', value: (t) => [h('span', { class: 'pill ' + (t.paused ? 'bad' : t.started ? 'ok' : 'warn'), 'data-state': stateOf(t) }, stateOf(t)),
        t.node ? h('div', { class: 'muted' }, 'on ', t.node) : '',
        t.paused ? h('div', null, h('button', { type: 'button', class: 'small', 'data-resume': t.name, onclick: () => resume(t) }, 'Resume…')) : ''] },
      { label: 'Behind', value: (t) => t.behind === null || t.behind === undefined ? '—' : fmtNum(t.behind), cls: 'num' },
      { label: 'Delivered', value: (t) => [fmtNum(t.delivered), t.failures ? h('div', { class: 'bad-text' }, fmtNum(t.failures) + ' failed') : ''], cls: 'num' },
      { label: 'Last error', value: (t) => fmtValue(t.last_error), cls: 'wrap' },
    ];
    await ctx.every(POLL_MS, async () => {
      const answer = await optional('triggers');
      if (!ctx.alive()) return;
      if (answer) {
        const list = Array.isArray(answer.triggers) ? answer.triggers : [];
        body.replaceChildren(list.length ? table(columns, list, { id: 'triggers-table' })
          : h('p', { class: 'empty', id: 'triggers-empty' }, 'The app has no trigger (triggers/<name>.json in the app directory).'));
      } else {
        body.replaceChildren(unavailable('GET ' + API + '/triggers'));
      }
      ctx.clearProblem();
      stamp(updated);
    });
  }

  // ---- Sync -------------------------------------------------------------------------------

  async function syncPage(ctx) {
    const updated = updatedStamp();
    pageHead(ctx, 'Sync', updated);
    const stateValue = h('dd', { id: 'sync-state' }, '…');
    const connectionsValue = h('dd', { id: 'sync-connections' }, '…');
    const pause = h('button', { type: 'button', class: 'danger', id: 'sync-pause' }, 'Pause sync…');
    const resume = h('button', { type: 'button', class: 'primary', id: 'sync-resume' }, 'Resume sync…');
    const terminate = h('button', { type: 'button', class: 'danger', id: 'sync-terminate' }, 'Terminate sync…');
    const enable = h('button', { type: 'button', class: 'primary', id: 'sync-enable' }, 'Enable sync…');
    ctx.main.append(
      h('div', { class: 'card' },
        h('dl', { class: 'facts' }, h('dt', null, 'Sync'), stateValue, h('dt', null, 'Connections open now'), connectionsValue)),
      h('div', { class: 'card' },
        h('h2', null, 'Pause'),
        h('p', null, 'Stops sync for every device at once and keeps the sync identity: each device is disconnected with error 245 (sync paused), ' +
          'keeps its data and its unsynced writes, and retries with a growing backoff. Resuming carries on where every device left off, with no client reset.'),
        pause),
      h('div', { class: 'card' },
        h('h2', null, 'Resume'),
        h('p', null, 'Starts sync again after a pause with the same sync identity: devices reconnect, upload what they wrote meanwhile and download what they missed.'),
        resume),
      h('div', { class: 'card' },
        h('h2', null, 'Terminate'),
        h('p', null, 'Stops sync for every device at once: each is disconnected with error 240 and keeps its data and its unsynced writes, ' +
          'retrying until sync is enabled again. Nothing is deleted on the server, but the sync identity ends: enabling sync again resets every device that synced before.'),
        terminate),
      h('div', { class: 'card' },
        h('h2', null, 'Enable'),
        h('p', null, 'Starts sync again after a terminate, with a new sync identity: every device that synced before gets a client reset on its next connection.'),
        enable));
    const show = (status) => {
      const state = syncStateOf(status);
      showSyncState(state);
      stateValue.textContent = state;
      stateValue.className = state === 'enabled' ? '' : 'bad-text';
      connectionsValue.textContent = fmtNum(status.connections);
      // What each action applies to; the server answers 409 otherwise.
      pause.disabled = state !== 'enabled';
      resume.disabled = state !== 'paused';
      terminate.disabled = state === 'terminated';
      enable.disabled = state !== 'terminated';
      pause.title = pause.disabled ? 'Sync is ' + state + '.' : '';
      resume.title = resume.disabled ? 'Resume applies to paused sync.' : '';
      terminate.title = terminate.disabled ? 'Sync is terminated already.' : '';
      enable.title = enable.disabled ? 'Enable applies after a terminate' + (state === 'paused' ? '; paused sync is resumed.' : '.') : '';
    };
    const act = async (path, done) => {
      try {
        const status = await api('POST', path);
        if (ctx.alive()) show(status);
        toast(done);
      } catch (e) { if (e.status !== 401 && e.status !== 403) toast(describe(e), true); }
    };
    pause.addEventListener('click', async () => {
      const ok = await confirmAction('Pause sync?', [
        'Every device is disconnected now with error 245 (sync paused). Devices keep their local data and their unsynced writes, and retry with a growing backoff; none can sync until sync is resumed.',
        'Resuming keeps the sync identity: no device gets a client reset, unless it stays offline longer than the maximum offline days.',
      ], 'Pause sync', true);
      if (!ok || !ctx.alive()) return;
      await act('sync/pause', 'Sync paused: every device was disconnected with error 245.');
    });
    resume.addEventListener('click', async () => {
      const ok = await confirmAction('Resume sync?', [
        'Sync starts again with the same sync identity. Devices reconnect at their next retry, upload what they wrote while sync was paused and download what they missed; none gets a client reset.',
      ], 'Resume sync', false);
      if (!ok || !ctx.alive()) return;
      await act('sync/resume', 'Sync resumed: devices carry on at their next retry.');
    });
    terminate.addEventListener('click', async () => {
      const ok = await confirmAction('Terminate sync?', [
        'Every device is disconnected now with error 240 (sync terminated). Devices keep their local data and their unsynced writes, and keep retrying until sync is enabled again; none can sync meanwhile.',
        'Enabling sync afterwards gives every device that synced before a client reset. To stop sync for a while without resets, pause it instead.',
      ], 'Terminate sync', true);
      if (!ok || !ctx.alive()) return;
      await act('sync/terminate', 'Sync terminated: every device was disconnected with error 240.');
    });
    enable.addEventListener('click', async () => {
      const ok = await confirmAction('Enable sync?', [
        'Sync starts again with a new sync identity. Every device known before gets a client reset on its next connection: it downloads the server\'s data afresh and, in recovery mode, uploads its unsynced writes again; otherwise they are discarded.',
        'Devices that connect for the first time sync normally.',
      ], 'Enable sync', false);
      if (!ok || !ctx.alive()) return;
      await act('sync/enable', 'Sync enabled with a new identity: devices that synced before will reset.');
    });
    await ctx.every(POLL_MS, async () => {
      const status = await api('GET', 'sync');
      if (!ctx.alive()) return;
      show(status);
      ctx.clearProblem();
      stamp(updated);
    });
  }

  // ---- Settings ---------------------------------------------------------------------------

  function recoveryText(mode) {
    if (typeof mode === 'boolean') return mode ? 'enabled' : 'disabled';  // older servers
    if (mode === 'recover_unsynced_changes') return 'recover unsynced changes';
    return fmtValue(mode);
  }

  function chips(list, id) {
    return list.length ? h('ul', { class: 'chips', id }, list.map((f) => h('li', null, code(typeof f === 'string' ? f : JSON.stringify(f)))))
      : h('p', { class: 'empty' }, 'None.');
  }

  // A role's document filters ({read, write} as in the rules file), one line each.
  function documentFilters(r) {
    const f = r.document_filters;
    if (!f || typeof f !== 'object' || !Object.keys(f).length) return '—';
    return h('ul', { class: 'detail-lines' }, Object.entries(f).map(([k, v]) => h('li', null, k + ': ', code(JSON.stringify(v)))));
  }

  async function settings(ctx) {
    pageHead(ctx, 'Settings');
    const s = await optional('settings');
    if (!ctx.alive()) return;
    if (!s) { ctx.main.append(unavailable('GET ' + API + '/settings')); return; }
    const list = (v) => (Array.isArray(v) ? v : []);
    const fields = list(s.queryable_fields), indexed = list(s.indexed_queryable_fields);
    const roles = list(s.roles), files = list(s.files), collections = list(s.collections), providers = list(s.auth_providers);
    // [label, value, shown]: what an older server does not send is left out.
    const facts = [
      ['App', fmtValue(s.app_name), true],
      ['App id', s.app_id ? code(s.app_id) : '—', 'app_id' in s],
      ['Max offline days', fmtValue(s.max_offline_days), true],
      ['Recovery mode', recoveryText(s.recovery_mode), true],
      ['Development mode', fmtValue(s.development_mode), 'development_mode' in s],
      ['Collections', collections.length ? collections.map((c, i) => [i ? ', ' : '', String(c)]) : '—', 'collections' in s],
      ['Authentication', providers.length ? providers.map((p, i) => [i ? ', ' : '', String(p.name),
        p.type && p.type !== p.name ? ' (' + String(p.type) + ')' : '', p.disabled ? ' (disabled)' : '']) : '—', 'auth_providers' in s],
    ];
    ctx.main.append(
      h('p', { class: 'muted' }, 'Read-only: the server reads these from its app directory at start.'),
      h('div', { class: 'card', id: 'settings-sync' },
        h('h2', null, 'App and sync'),
        h('dl', { class: 'facts' }, facts.filter((f) => f[2]).map(([k, v]) => [h('dt', null, k), h('dd', null, v)]))),
      h('div', { class: 'card', id: 'settings-fields' },
        h('h2', null, 'Queryable fields'),
        chips(fields, 'queryable-fields'),
        'indexed_queryable_fields' in s ? [h('h2', { class: 'subhead' }, 'Indexed queryable fields'), chips(indexed, 'indexed-fields')] : null),
      h('div', { class: 'section', id: 'settings-roles' },
        h('h2', null, 'Roles'),
        roles.length ? table([
          { label: 'Role', value: (r) => fmtValue(r.name) },
          { label: 'Collection', value: (r) => fmtValue(r.collection) },
          { label: 'Apply when', value: (r) => fmtValue(r.apply_when) },
          { label: 'Document filters', value: documentFilters, cls: 'wrap' },
          { label: 'Read', value: (r) => fmtValue(r.read) },
          { label: 'Write', value: (r) => fmtValue(r.write) },
          { label: 'Other', value: (r) => {
            const rest = Object.assign({}, r);
            for (const k of ['name', 'collection', 'apply_when', 'document_filters', 'read', 'write']) delete rest[k];
            const keys = Object.keys(rest);
            return keys.length ? h('ul', { class: 'chips' }, keys.map((k) => h('li', null, k + ': ',
              typeof rest[k] === 'object' && rest[k] !== null ? code(JSON.stringify(rest[k])) : fmtValue(rest[k])))) : '—';
          }, cls: 'wrap' },
        ], roles, { id: 'roles-table' }) : h('p', { class: 'empty' }, 'No role.')),
      h('div', { class: 'card', id: 'settings-files' },
        h('h2', null, 'App directory'),
        files.length ? files.map((f) => h('details', null, h('summary', null, code(f.path)), h('pre', null, String(f.content))))
          : h('p', { class: 'empty' }, 'No file.')));
  }

  const pages = {
    dashboard, devices, users, 'sync-log': syncLog, rejected, triggers, sync: syncPage, settings,
  };

  // ---- Start ------------------------------------------------------------------------------

  function start() {
    $('signin-form').addEventListener('submit', signIn);
    $('signout').addEventListener('click', signOut);
    $('nav-toggle').addEventListener('click', () => setNav(!$('nav').classList.contains('open')));
    window.addEventListener('hashchange', () => { if (!$('shell').hidden) route(); });
    if (token()) {
      // A token from earlier in this tab: checked before anything is shown.
      api('GET', 'sync').then(showShell, (e) => {
        if (e.status !== 401 && e.status !== 403) { $('signin').hidden = false; showSigninError(describe(e)); }
      });
    } else {
      $('signin').hidden = false;
      $('signin-token').focus();
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
