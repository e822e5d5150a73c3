/**
 * Which committed state changes become structured log lines (Workers Logs), by level.
 *
 * Every state change has its audit row whatever the level; the log line is a copy for log
 * search and alerts. Two changes are routine and come once per node or once per heartbeat: a
 * ticket requested (`ticket.created`) and a lease extended (`lease.extended`). They are debug
 * lines, so that a herd of nodes asking at once does not turn into as many log lines; the
 * changes that decide a join (admitted, joined, expired, revoked, bootstrapped) and every admin
 * action are info lines. `LOG_LEVEL=debug` logs every change, `warn` none (errors are always
 * logged).
 * @module
 */

export type LogLevel = "debug" | "info" | "warn";

export const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn"];
export const DEFAULT_LOG_LEVEL: LogLevel = "info";

const ROUTINE_ACTIONS: ReadonlySet<string> = new Set(["ticket.created", "lease.extended"]);

/** The level of an audit action's log line. */
export function actionLevel(action: string): "debug" | "info" {
  return ROUTINE_ACTIONS.has(action) ? "debug" : "info";
}

/** `LOG_LEVEL` as configured; unset or unknown values mean the default. */
export function parseLogLevel(value: string | undefined): LogLevel {
  const v = value?.trim().toLowerCase();
  return (LOG_LEVELS as readonly string[]).includes(v ?? "") ? (v as LogLevel) : DEFAULT_LOG_LEVEL;
}

/** Whether a line of `level` is written when the threshold is `threshold`. */
export function isLogged(level: "debug" | "info", threshold: LogLevel): boolean {
  return LOG_LEVELS.indexOf(level) >= LOG_LEVELS.indexOf(threshold);
}
