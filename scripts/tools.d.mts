export type ToolName = "etcd" | "etcdctl" | "spin" | "chromium" | "systemd-analyze" | "promtool" | "qemu-aarch64-static" | "nft" | "faketime";
/** libfaketime, preloaded (LD_PRELOAD) into a process whose clock the lab skews. */
export const LIBFAKETIME: string;
/** The directory qemu-aarch64-static takes as -L: where the arm64 dynamic loader and libraries are. */
export const AARCH64_SYSROOT: string;
/** The tool's path, from its environment variable, the usual places or PATH; null when absent. */
export function findTool(name: ToolName): string | null;
/** The tool's path; installs its Debian package first when missing and running as root. */
export function ensureTool(name: ToolName): string;
/** Whether the path is an executable file. */
export function executable(path: string): boolean;
/** The command's path on PATH, or null. */
export function onPath(name: string): string | null;
/** The `go` command: $GO, PATH, or the usual install places; null when there is none. */
export function findGo(): string | null;
