// console.css of the admin console, served by ConsoleRoutes. Edit the text between the quotes as
// the CSS it is: it is a raw string, so nothing in it is escaped or interpolated.

extension ConsoleAssets {
    /// The style sheet (`/admin/console.css`): a side navigation that folds into a menu, and tables that stack into cards, below 720 px.
    static let style = #"""
:root {
  --bg: #f4f6f8;
  --card: #ffffff;
  --ink: #1d2430;
  --muted: #5d6878;
  --line: #d9dee5;
  --accent: #1f6feb;
  --accent-ink: #ffffff;
  --ok: #1a7f37;
  --ok-bg: #dafbe1;
  --bad: #b42318;
  --bad-bg: #fde8e6;
  --warn-bg: #fff4d6;
  --nav-w: 13rem;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif;
  font-size: 15px;
  color: var(--ink);
  background: var(--bg);
}
* { box-sizing: border-box; }
html { scroll-padding-top: 4rem; }
body { margin: 0; min-height: 100vh; }
[hidden] { display: none !important; }
code, pre, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 0.9em; }
pre { white-space: pre-wrap; word-break: break-word; background: #f0f2f5; padding: 0.6rem; border-radius: 6px; margin: 0.4rem 0; max-height: 30rem; overflow: auto; }
h1 { font-size: 1.4rem; margin: 0 0 0.8rem; }
h2 { font-size: 1.1rem; margin: 0 0 0.6rem; }
h2.subhead { margin-top: 1rem; }
a { color: var(--accent); }
.muted { color: var(--muted); }
.noscript { padding: 2rem; }

button, input, select { font: inherit; }
button {
  border: 1px solid var(--line); background: var(--card); color: var(--ink);
  border-radius: 6px; padding: 0.45rem 0.9rem; cursor: pointer; min-height: 2.3rem;
}
button:hover:not(:disabled) { border-color: var(--accent); }
button:disabled { opacity: 0.5; cursor: not-allowed; }
button.primary { background: var(--accent); color: var(--accent-ink); border-color: var(--accent); }
button.danger { background: var(--bad); color: #fff; border-color: var(--bad); }
button.quiet { background: transparent; border-color: transparent; }
button.small { padding: 0.2rem 0.6rem; min-height: 1.9rem; font-size: 0.9em; }
input, select {
  border: 1px solid var(--line); border-radius: 6px; padding: 0.4rem 0.5rem; background: #fff; color: var(--ink);
  min-height: 2.3rem; max-width: 100%;
}
input[type="checkbox"] { min-height: 0; }
label { font-weight: 600; display: block; margin: 0.6rem 0 0.25rem; }

/* Sign-in */
.signin { display: flex; justify-content: center; align-items: flex-start; padding: 10vh 1rem 2rem; }
.signin-card { width: 100%; max-width: 28rem; }
.signin-card input { width: 100%; }
.signin-card button { margin-top: 1rem; width: 100%; }
.refusal { background: var(--bad-bg); color: var(--bad); border: 1px solid #f3b5ae; border-radius: 6px; padding: 0.7rem; margin-top: 1rem; }

/* Shell: top bar, side navigation, page */
.shell { display: grid; grid-template-columns: var(--nav-w) 1fr; grid-template-rows: auto 1fr; min-height: 100vh; }
.topbar {
  grid-column: 1 / -1; display: flex; align-items: center; gap: 0.8rem;
  background: #111827; color: #fff; padding: 0.5rem 1rem; position: sticky; top: 0; z-index: 5;
}
.topbar .brand { color: #fff; text-decoration: none; font-weight: 700; font-size: 1.1rem; margin-right: auto; }
.topbar .brand .muted { color: #9aa4b2; font-weight: 400; }
.topbar button.quiet { color: #fff; white-space: nowrap; }
.nav-toggle { display: none; background: transparent; color: #fff; border-color: #4b5563; }
.nav { background: var(--card); border-right: 1px solid var(--line); padding: 0.8rem 0; }
.nav a { display: block; padding: 0.55rem 1.2rem; color: var(--ink); text-decoration: none; border-left: 3px solid transparent; }
.nav a:hover { background: var(--bg); }
.nav a.active { border-left-color: var(--accent); background: #eaf1fd; font-weight: 600; }
.main { padding: 1.2rem 1.5rem 3rem; min-width: 0; outline: none; }
.page-head { display: flex; align-items: center; gap: 0.8rem; flex-wrap: wrap; margin-bottom: 1rem; }
.page-head h1 { margin: 0; margin-right: auto; }
.updated { color: var(--muted); font-size: 0.85em; }

.pill { display: inline-block; border-radius: 999px; padding: 0.1rem 0.6rem; font-size: 0.8rem; font-weight: 600; background: #374151; color: #fff; }
.pill:empty { display: none; }
.pill.ok { background: var(--ok-bg); color: var(--ok); }
.pill.bad { background: var(--bad-bg); color: var(--bad); }
.pill.warn { background: var(--warn-bg); color: #8a5a00; }
.pill { white-space: nowrap; }
.pill.kind { background: #e5e9f0; color: var(--ink); font-weight: 500; }
.pill.kind[data-kind="compensating_write"], .pill.kind[data-kind="error"] { background: var(--bad-bg); color: var(--bad); }
.pill.kind[data-kind="client_reset"] { background: var(--warn-bg); color: #8a5a00; }
.pill.kind[data-kind="upload"] { background: #eaf1fd; color: #174ea6; }
.section { margin-bottom: 1rem; }

.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.1rem; margin-bottom: 1rem; }
.card > p:first-child { margin-top: 0; }
.card > p:last-child { margin-bottom: 0; }
.unavailable { background: var(--warn-bg); border: 1px solid #f0d58c; border-radius: 6px; padding: 0.7rem; }
.error { background: var(--bad-bg); color: var(--bad); border-radius: 6px; padding: 0.7rem; }
.empty { color: var(--muted); font-style: italic; }

/* Dashboard tiles */
.tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(11rem, 1fr)); gap: 0.8rem; margin-bottom: 1rem; }
.tile { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 0.8rem 1rem; }
.tile .label { color: var(--muted); font-size: 0.85rem; }
.tile .value { font-size: 1.9rem; font-weight: 700; font-variant-numeric: tabular-nums; margin: 0.2rem 0; }
.tile .sub { color: var(--muted); font-size: 0.8rem; min-height: 1em; }
.tile svg { width: 100%; height: 2rem; display: block; }
.tile svg polyline { fill: none; stroke: var(--accent); stroke-width: 1.5; vector-effect: non-scaling-stroke; }
.tile svg line { stroke: var(--line); stroke-width: 1; vector-effect: non-scaling-stroke; }

/* Tables (stacked into cards on a phone) */
.table-wrap { overflow-x: auto; background: var(--card); border: 1px solid var(--line); border-radius: 8px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 0.5rem 0.7rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 0.85rem; color: var(--muted); font-weight: 600; background: #fafbfc; }
tr:last-child td { border-bottom: none; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td .actions, .actions { display: flex; gap: 0.4rem 0.6rem; flex-wrap: wrap; align-items: center; }
td.wrap { word-break: break-word; min-width: 14rem; }
td.time, td.nowrap { white-space: nowrap; }
td.break { word-break: break-all; min-width: 7rem; }
details summary { cursor: pointer; color: var(--accent); }

/* Forms of filters */
.filters { display: flex; flex-wrap: wrap; gap: 0.8rem; align-items: flex-end; }
.filters .field { display: flex; flex-direction: column; }
.filters .field label { margin: 0 0 0.25rem; font-size: 0.85rem; }
.kinds { display: flex; flex-wrap: wrap; gap: 0.3rem 0.9rem; border: none; margin: 0.9rem 0 0; padding: 0; }
.kinds legend { font-weight: 600; font-size: 0.85rem; padding: 0; margin-bottom: 0.25rem; }
.kinds label { font-weight: 400; display: inline-flex; gap: 0.3rem; align-items: center; margin: 0; }
.more { margin-top: 0.8rem; display: flex; gap: 0.8rem; align-items: center; }

/* Definition lists (Sync, Settings) */
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.4rem 1.2rem; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; font-weight: 600; word-break: break-word; }
ul.chips { list-style: none; padding: 0; margin: 0; display: flex; flex-wrap: wrap; gap: 0.4rem; }
ul.chips li { background: #eaf1fd; border-radius: 6px; padding: 0.15rem 0.5rem; }
ul.detail-lines { margin: 0.3rem 0; padding-left: 1.1rem; }
ul.detail-lines li { word-break: break-word; margin: 0.1rem 0; }
dl.detail-facts { grid-template-columns: max-content minmax(0, 1fr); gap: 0.15rem 0.8rem; margin: 0.3rem 0; font-size: 0.92em; }
dl.detail-facts dd { font-weight: 400; }
details.entry-details[open] { min-width: min(26rem, 100%); }

.confirm { border: none; border-radius: 10px; padding: 1.2rem 1.3rem; max-width: min(34rem, calc(100vw - 2rem)); box-shadow: 0 10px 40px rgba(0,0,0,0.3); }
.confirm::backdrop { background: rgba(17, 24, 39, 0.55); }
.confirm .actions { justify-content: flex-end; margin-top: 1.2rem; }
.confirm p { line-height: 1.45; }

.toast {
  position: fixed; bottom: 1rem; left: 0; right: 0; margin: 0 auto; width: max-content; z-index: 20;
  background: #111827; color: #fff; padding: 0.6rem 1rem; border-radius: 8px; max-width: calc(100vw - 2rem);
}
.toast.bad { background: var(--bad); }

@media (max-width: 720px) {
  .shell { grid-template-columns: minmax(0, 1fr); }
  .nav-toggle { display: inline-block; }
  .topbar { gap: 0.5rem; padding: 0.5rem 0.7rem; }
  .topbar .brand .muted { display: none; }
  .topbar .pill { min-width: 0; overflow: hidden; text-overflow: ellipsis; font-size: 0.75rem; }
  .topbar button.quiet { padding: 0.45rem 0.3rem; }
  .nav { display: none; border-right: none; border-bottom: 1px solid var(--line); padding: 0.3rem 0; }
  .nav.open { display: block; }
  .main { padding: 1rem 0.8rem 3rem; }
  .tiles { grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 0.6rem; }
  .tile .value { font-size: 1.5rem; }
  .table-wrap { overflow-x: visible; background: transparent; border: none; }
  table.stack thead { display: none; }
  table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; width: 100%; }
  table.stack tr { background: var(--card); border: 1px solid var(--line); border-radius: 8px; margin-bottom: 0.6rem; padding: 0.3rem 0; }
  table.stack td { border: none; padding: 0.25rem 0.8rem; display: grid; grid-template-columns: 7.5rem minmax(0, 1fr); gap: 0.5rem; word-break: break-word; min-width: 0; }
  table.stack td.num { text-align: left; }
  table.stack td::before { content: attr(data-label); color: var(--muted); font-size: 0.8rem; font-weight: 600; }
  .filters .field, .filters .field input, .filters .field select { width: 100%; }
  dl.facts { grid-template-columns: 1fr; gap: 0.1rem; }
  dl.facts dd { margin-bottom: 0.5rem; }
  dl.facts.detail-facts { grid-template-columns: max-content minmax(0, 1fr); gap: 0.1rem 0.6rem; }
  dl.facts.detail-facts dd { margin-bottom: 0; }
  table.stack td.time, table.stack td.nowrap { white-space: normal; }
}
.bad-text { color: var(--bad); }
"""#
}
