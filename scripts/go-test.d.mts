/** The Go verifier module's directory (integrations/go). */
export const GO_MODULE: string;
/** The `go` command: $GO, PATH, or the usual install places; null when there is none. */
export function findGo(): string | null;
/** Runs `go args…` in the module; returns the exit status. */
export function go(args: string[], env?: Record<string, string>): number;
