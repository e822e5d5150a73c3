/**
 * The names of the agent's progress events (`step` in every JSON line).
 * @module
 */

/** The protocol steps, in order. Stable names: scripts and tests match on them. */
export type Step =
  | "start"
  | "ticket"
  | "queued"
  | "admitted"
  | "bootstrap"
  | "member-add"
  | "member-added"
  | "pki"
  | "etcd-start"
  | "exec"
  | "exec-exit"
  | "etcd-ready"
  | "member-started"
  | "etcd-exit"
  | "etcd-tls"
  | "cleanup"
  | "rescue"
  | "stuck"
  | "promote"
  | "promoted"
  | "complete"
  | "joined"
  | "running"
  | "retry"
  | "reachable"
  | "broker-error"
  | "lease"
  | "refused"
  | "gave-up"
  | "stopping"
  | "error";
