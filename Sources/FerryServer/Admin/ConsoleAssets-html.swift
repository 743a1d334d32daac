// index.html of the admin console, served by ConsoleRoutes. Edit the text between the quotes as
// the HTML it is: it is a raw string, so nothing in it is escaped or interpolated.

extension ConsoleAssets {
    /// The one page (`/admin`, `/admin/`): the shell, the sign-in form and the confirmation dialog.
    static let page = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Ferry admin console</title>
<link rel="icon" href="/admin/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/admin/console.css">
<script src="/admin/console.js" defer></script>
</head>
<body>
<noscript><p class="noscript">The Ferry admin console needs JavaScript.</p></noscript>

<section id="signin" class="signin" hidden>
  <form id="signin-form" class="card signin-card" autocomplete="off">
    <h1>Ferry admin console</h1>
    <p class="muted">Sign in with this server's admin token (the <code>FERRY_ADMIN_TOKEN</code> secret).
      The token stays in this browser tab (session storage) and is sent only to this server's admin API.</p>
    <label for="signin-token">Admin token</label>
    <input id="signin-token" name="token" type="password" required autocomplete="off" spellcheck="false">
    <button id="signin-submit" type="submit" class="primary">Sign in</button>
    <p id="signin-error" class="refusal" role="alert" hidden></p>
  </form>
</section>

<div id="shell" class="shell" hidden>
  <header class="topbar">
    <button id="nav-toggle" class="nav-toggle" type="button" aria-controls="nav" aria-expanded="false">Menu</button>
    <a class="brand" href="#/dashboard">Ferry <span class="muted">admin</span></a>
    <span id="sync-pill" class="pill" title="Sync state"></span>
    <button id="signout" type="button" class="quiet">Sign out</button>
  </header>
  <nav id="nav" class="nav" aria-label="Pages">
    <a href="#/dashboard" data-page="dashboard">Dashboard</a>
    <a href="#/devices" data-page="devices">Devices</a>
    <a href="#/users" data-page="users">Users</a>
    <a href="#/sync-log" data-page="sync-log">Sync log</a>
    <a href="#/rejected" data-page="rejected">Rejected writes</a>
    <a href="#/triggers" data-page="triggers">Triggers</a>
    <a href="#/sync" data-page="sync">Sync</a>
    <a href="#/settings" data-page="settings">Settings</a>
  </nav>
  <main id="main" class="main" tabindex="-1"></main>
</div>

<dialog id="confirm-dialog" class="confirm" aria-labelledby="confirm-title">
  <form method="dialog">
    <h2 id="confirm-title"></h2>
    <div id="confirm-text"></div>
    <div class="actions">
      <button id="confirm-cancel" value="cancel" type="submit">Cancel</button>
      <button id="confirm-ok" value="ok" type="submit" class="danger"></button>
    </div>
  </form>
</dialog>
<div id="toast" class="toast" role="status" aria-live="polite" hidden></div>
</body>
</html>
"""#
}
