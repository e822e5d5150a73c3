/**
 * The console's HTML shell. Everything dynamic is built by the script with DOM calls (never
 * innerHTML), so nothing the broker returns is ever parsed as markup. The password field has no
 * `name`: should the form ever be submitted by the browser itself (the script blocked, say), the
 * token cannot end up in the URL.
 * @module
 */
export const CONSOLE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Join broker console</title>
<link rel="icon" href="/console/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/console/app.css">
<script type="module" src="/console/app.js"></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <h1><img src="/console/icon.svg" alt="" width="24" height="24"> Join broker console</h1>
  <p id="connection" class="connection" role="status" aria-live="polite">Signed out</p>
</header>
<main id="main" tabindex="-1">
  <form id="signin" class="card signin" autocomplete="off">
    <h2>Open a cluster</h2>
    <div class="fields">
      <label for="token">Admin token</label>
      <input id="token" type="password" required spellcheck="false" autocomplete="off" placeholder="the ADMIN_TOKEN, or a read-only credential">
      <label for="cluster">Cluster</label>
      <input id="cluster" name="cluster" type="text" required spellcheck="false" autocapitalize="none" list="known-clusters" pattern="[a-z0-9]([a-z0-9\\-]{0,61}[a-z0-9])?" placeholder="e.g. prod-eu">
      <datalist id="known-clusters"></datalist>
    </div>
    <div class="buttons">
      <button type="submit" class="primary">Open</button>
      <button type="button" id="signout" class="quiet" hidden>Forget token</button>
    </div>
    <p class="hint">The token stays in this tab (session storage) and is sent only to this broker, as a bearer header.</p>
    <div id="error" class="error" role="alert" hidden></div>
  </form>

  <div id="dashboard" hidden>
    <section class="card summary" aria-labelledby="summary-title">
      <div class="summary-head">
        <h2 id="summary-title">Cluster <span id="cluster-name"></span></h2>
        <span id="state-badge" class="badge"></span>
        <span id="read-only" class="badge" title="Signed in with a read-only credential: it can look, and change nothing" hidden>read-only</span>
        <select id="switch-cluster" aria-label="Switch to another cluster" hidden></select>
        <button type="button" id="pause" class="action write"></button>
      </div>
      <div id="needs-operator" class="needs-operator" role="alert" hidden></div>
      <dl id="facts" class="facts"></dl>
    </section>

    <section class="card" aria-labelledby="queue-title">
      <h2 id="queue-title">Queue</h2>
      <div class="scroll"><table id="queue"><caption class="sr-only">Live tickets in admission order</caption>
        <thead><tr><th scope="col">#</th><th scope="col">Node</th><th scope="col">State</th><th scope="col">Role</th><th scope="col">Waited</th><th scope="col">Lease</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
        <tbody></tbody></table></div>
      <p id="queue-empty" class="empty" hidden>No node is queued or admitted.</p>
    </section>

    <section class="card" aria-labelledby="timeline-title">
      <h2 id="timeline-title">Recent joins</h2>
      <div id="timeline" class="timeline"></div>
      <p class="legend"><span><span class="key queued"></span>queued</span><span><span class="key admitted"></span>admitted</span><span><span class="key joined"></span>joined</span><span><span class="key ended"></span>ended without joining</span></p>
    </section>

    <div class="columns">
      <section class="card" aria-labelledby="members-title">
        <h2 id="members-title">Members and learners</h2>
        <div class="scroll"><table id="members"><caption class="sr-only">etcd members as the broker knows them</caption>
          <thead><tr><th scope="col">Node</th><th scope="col">Kind</th><th scope="col">Member ID</th><th scope="col">Peer URL</th><th scope="col">Since</th></tr></thead>
          <tbody></tbody></table></div>
        <p id="members-empty" class="empty" hidden>No member yet.</p>
      </section>
      <section class="card" aria-labelledby="policy-title">
        <h2 id="policy-title">Policy</h2>
        <dl id="policy" class="facts"></dl>
      </section>
    </div>

    <section class="card" aria-labelledby="audit-title">
      <h2 id="audit-title">Audit stream</h2>
      <ol id="audit" class="audit" reversed></ol>
    </section>

    <section class="card" aria-labelledby="tokens-title">
      <h2 id="tokens-title">Enrollment tokens</h2>
      <form id="token-form" class="inline write" autocomplete="off">
        <label for="token-description">Description</label>
        <input id="token-description" type="text" maxlength="200" placeholder="e.g. wave 2 controllers">
        <label for="token-ttl">Valid for (hours)</label>
        <input id="token-ttl" type="number" min="1" max="8760" step="1" inputmode="numeric" value="24" required>
        <label for="token-no-expiry"><input id="token-no-expiry" type="checkbox"> never expires</label>
        <label for="token-uses">Uses</label>
        <input id="token-uses" type="number" min="1" max="1000000" step="1" inputmode="numeric" placeholder="unlimited">
        <button type="submit" class="action">Create token</button>
      </form>
      <div id="new-token" class="new-token" hidden>
        <label for="new-token-value">New token — shown once, copy it now</label>
        <div class="copy-row"><input id="new-token-value" type="text" readonly spellcheck="false"><button type="button" id="copy-token" class="action">Copy</button><button type="button" id="hide-token" class="quiet">Done</button></div>
      </div>
      <div class="scroll"><table id="tokens"><caption class="sr-only">Enrollment tokens of this cluster</caption>
        <thead><tr><th scope="col">ID</th><th scope="col">Description</th><th scope="col">State</th><th scope="col">Uses</th><th scope="col">Expires</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
        <tbody></tbody></table></div>
    </section>
  </div>
</main>

<dialog id="confirm" aria-labelledby="confirm-title">
  <form method="dialog" id="confirm-form">
    <h2 id="confirm-title"></h2>
    <p id="confirm-text"></p>
    <div id="confirm-reason-row" hidden>
      <label for="confirm-reason">Reason (recorded in the audit log)</label>
      <input id="confirm-reason" type="text" maxlength="500">
    </div>
    <div class="buttons">
      <button type="button" class="quiet" id="confirm-cancel">Cancel</button>
      <button type="submit" class="danger" id="confirm-ok"></button>
    </div>
  </form>
</dialog>
</body>
</html>
`;
