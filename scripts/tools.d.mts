/** The tool's path, from its environment variable, the usual places or PATH; null when absent. */
export function findTool(name: "etcd" | "etcdctl" | "spin" | "chromium" | "systemd-analyze"): string | null;
/** The tool's path; installs its Debian package first when missing and running as root. */
export function ensureTool(name: "etcd" | "etcdctl" | "spin" | "chromium" | "systemd-analyze"): string;
/** Whether the path is an executable file. */
export function executable(path: string): boolean;
/** The command's path on PATH, or null. */
export function onPath(name: string): string | null;
/** The `go` command: $GO, PATH, or the usual install places; null when there is none. */
export function findGo(): string | null;
