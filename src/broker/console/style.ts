/**
 * The console's stylesheet: system fonts only, light and dark schemes, one column on a phone.
 * @module
 */
export const CONSOLE_CSS = `
:root {
  --bg: #f4f6f9; --card: #ffffff; --fg: #17202c; --muted: #5b6675; --line: #dde2ea;
  --accent: #1d4ed8; --accent-fg: #ffffff; --focus: #f59e0b;
  --queued: #94a3b8; --admitted: #2563eb; --joined: #16a34a; --ended: #dc2626; --paused: #b45309;
  --mono: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color-scheme: light dark;
}
@media (prefers-color-scheme: dark) {
  :root { --bg: #0f141b; --card: #18202b; --fg: #e6ebf2; --muted: #9aa6b6; --line: #2b3646; --accent: #3b82f6;
    --queued: #64748b; --admitted: #3b82f6; --joined: #22c55e; --ended: #f87171; --paused: #f59e0b; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font-size: 15px; line-height: 1.45; }
.skip { position: absolute; left: -999px; top: 0; background: var(--card); padding: .5rem 1rem; z-index: 10; }
.skip:focus { left: .5rem; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.top { display: flex; align-items: center; justify-content: space-between; gap: 1rem; flex-wrap: wrap;
  padding: .75rem 1.25rem; background: var(--card); border-bottom: 1px solid var(--line); }
.top h1 { margin: 0; font-size: 1.1rem; display: flex; align-items: center; gap: .5rem; }
.connection { margin: 0; font-size: .85rem; color: var(--muted); display: flex; align-items: center; gap: .4rem; }
.connection::before { content: ""; width: .6rem; height: .6rem; border-radius: 50%; background: var(--queued); }
.connection.live::before { background: var(--joined); }
.connection.trouble::before { background: var(--ended); }
main { max-width: 1200px; margin: 0 auto; padding: 1rem; }
main:focus { outline: none; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 1rem 1.25rem; margin-bottom: 1rem; }
.card h2 { margin: 0 0 .75rem; font-size: 1rem; }
.signin { max-width: 34rem; margin: 2rem auto; }
.fields { display: grid; grid-template-columns: max-content 1fr; gap: .6rem .75rem; align-items: center; }
.hint { color: var(--muted); font-size: .85rem; margin: .75rem 0 0; }
input { font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: .45rem .6rem; min-width: 0; }
input[type=password], #cluster, #new-token-value { font-family: var(--mono); }
button { font: inherit; border-radius: 6px; padding: .4rem .85rem; cursor: pointer; border: 1px solid var(--line); background: var(--card); color: var(--fg); }
button.primary { background: var(--accent); color: var(--accent-fg); border-color: var(--accent); }
button.danger { background: var(--ended); color: #fff; border-color: var(--ended); }
button.action { border-color: var(--accent); color: var(--accent); }
button.quiet { border-color: transparent; color: var(--muted); }
button:disabled { opacity: .5; cursor: default; }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.buttons { display: flex; gap: .5rem; justify-content: flex-end; margin-top: 1rem; flex-wrap: wrap; }
.error { margin-top: 1rem; padding: .75rem 1rem; border-radius: 6px; border: 1px solid var(--ended); color: var(--ended); background: color-mix(in srgb, var(--ended) 8%, transparent); }
.error strong { display: block; }
.summary-head { display: flex; align-items: center; gap: .75rem; flex-wrap: wrap; }
.summary-head h2 { margin: 0; }
.summary-head #switch-cluster { margin-left: auto; }
select { font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: .35rem .5rem; max-width: 14rem; }
#cluster-name { font-family: var(--mono); }
.badge { font-size: .8rem; padding: .1rem .55rem; border-radius: 999px; background: color-mix(in srgb, var(--joined) 15%, transparent); color: var(--joined); font-weight: 600; }
.badge.paused { background: color-mix(in srgb, var(--paused) 18%, transparent); color: var(--paused); }
/* A read-only credential changes nothing: its write controls are not offered. */
.read-only .write { display: none !important; }
.needs-operator { margin-top: .75rem; padding: .75rem 1rem; border-radius: 6px; border: 1px solid var(--paused); background: color-mix(in srgb, var(--paused) 10%, transparent); overflow-wrap: anywhere; }
.needs-operator p { margin: .4rem 0 0; }
.needs-operator p:first-of-type { font-family: ui-monospace, monospace; font-size: .85rem; }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(11rem, 1fr)); gap: .5rem 1rem; margin: .75rem 0 0; }
.facts div { min-width: 0; }
.facts dt { color: var(--muted); font-size: .8rem; }
.facts dd { margin: 0; font-weight: 600; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; position: relative; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 600; font-size: .8rem; }
td.mono, .mono { font-family: var(--mono); font-size: .85rem; }
td.num { font-variant-numeric: tabular-nums; }
tr.admitted td { background: color-mix(in srgb, var(--admitted) 7%, transparent); }
.state { display: inline-flex; align-items: center; gap: .35rem; }
.state::before { content: ""; width: .55rem; height: .55rem; border-radius: 50%; background: var(--queued); }
.state.admitted::before { background: var(--admitted); }
.state.joined::before { background: var(--joined); }
.state.expired::before, .state.revoked::before, .state.abandoned::before { background: var(--ended); }
.lease-low { color: var(--ended); font-weight: 600; }
.empty { color: var(--muted); margin: .5rem 0 0; }
.columns { display: grid; grid-template-columns: minmax(0, 2fr) minmax(0, 1fr); gap: 0 1rem; }
.columns > * { min-width: 0; }
.timeline svg { max-width: 100%; height: auto; display: block; }
.timeline text { font-size: 12px; fill: var(--fg); }
.timeline .axis text { fill: var(--muted); font-size: 11px; }
.timeline .grid { stroke: var(--line); stroke-width: 1; }
.timeline .bar-queued { fill: var(--queued); }
.timeline .bar-admitted { fill: var(--admitted); }
.timeline .end-joined { fill: var(--joined); }
.timeline .end-ended { fill: var(--ended); }
.timeline .now { stroke: var(--muted); stroke-dasharray: 3 3; }
.legend { color: var(--muted); font-size: .8rem; margin: .5rem 0 0; display: flex; gap: .35rem 1.25rem; flex-wrap: wrap; align-items: center; }
.legend span { display: inline-flex; align-items: center; gap: .35rem; }
.key { display: inline-block; width: .8rem; height: .8rem; border-radius: 2px; background: var(--queued); }
.key.admitted { background: var(--admitted); } .key.joined { background: var(--joined); } .key.ended { background: var(--ended); }
.audit { list-style: none; margin: 0; padding: 0; max-height: 22rem; overflow-y: auto; font-size: .85rem; }
.audit li { display: grid; grid-template-columns: 5.5rem 14rem 1fr; gap: .75rem; padding: .3rem 0; border-bottom: 1px solid var(--line); }
.audit time { color: var(--muted); font-variant-numeric: tabular-nums; }
.audit .action-name { font-family: var(--mono); font-weight: 600; }
.audit .detail { color: var(--muted); overflow-wrap: anywhere; }
.audit li.fresh { animation: fresh 1.5s ease-out; }
@keyframes fresh { from { background: color-mix(in srgb, var(--accent) 18%, transparent); } to { background: transparent; } }
.inline { display: flex; flex-wrap: wrap; gap: .5rem .75rem; align-items: center; margin-bottom: .75rem; }
.inline input { width: 10rem; }
.inline #token-description { width: 16rem; }
.new-token { border: 1px solid var(--joined); border-radius: 8px; padding: .75rem; margin-bottom: .75rem; background: color-mix(in srgb, var(--joined) 8%, transparent); }
.copy-row { display: flex; gap: .5rem; margin-top: .4rem; }
.copy-row input { flex: 1; }
dialog { border: 1px solid var(--line); border-radius: 10px; padding: 1.25rem; max-width: min(30rem, 92vw); background: var(--card); color: var(--fg); }
dialog::backdrop { background: rgb(0 0 0 / .45); }
dialog h2 { margin: 0 0 .5rem; font-size: 1.05rem; }
dialog label { display: block; margin-bottom: .3rem; font-size: .9rem; }
dialog input { width: 100%; }
@media (max-width: 760px) {
  body { font-size: 14px; }
  main { padding: .6rem; }
  .card { padding: .8rem; }
  .columns { grid-template-columns: minmax(0, 1fr); }
  .facts { grid-template-columns: repeat(2, minmax(0, 1fr)); }
  .summary-head #switch-cluster { margin-left: 0; }
  .fields { grid-template-columns: 1fr; }
  .audit li { grid-template-columns: 5.5rem 1fr; }
  .audit .detail { grid-column: 1 / -1; }
  .inline input, .inline #token-description { width: 100%; }
  .inline label { width: 100%; margin-bottom: -.3rem; }
}
`;
