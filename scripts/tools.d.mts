/** The tool's path, from its environment variable, the usual places or PATH; null when absent. */
export function findTool(name: "etcd" | "spin" | "chromium"): string | null;
/** The tool's path; installs its Debian package first when missing and running as root. */
export function ensureTool(name: "etcd" | "spin" | "chromium"): string;
