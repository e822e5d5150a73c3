// Bindings that `wrangler types` cannot see: a secret, and an optional var.
interface Env {
  /** Bearer token of the admin API (`wrangler secret put ADMIN_TOKEN`). */
  ADMIN_TOKEN?: string;
  /** The `iss` of admission tokens; defaults to the origin that created the cluster. */
  ISSUER?: string;
  /** Which state changes are logged: `debug` (all), `info` (default: all but the routine ones), `warn` (none). */
  LOG_LEVEL?: string;
  /** Self-hosted: the restore of the data directory (`join-broker serve restore`) every cluster takes note of once. */
  RESTORE_ID?: string;
}
