/** Types of scripts/package.mjs: the node-side commands as one executable file per platform. */
export const ROOT: string;
export const RELEASE_DIR: string;
export const ARCHES: ("x64" | "arm64")[];
/** The ELF e_machine of each architecture. */
export const ELF_MACHINE: { x64: number; arm64: number };
/** `join-broker-<version>-linux-<arch>` */
export function releaseFileName(version: string, arch: string): string;
export function projectVersion(root?: string): string;
export function pinnedNodeVersion(root?: string): string;
export function packageCacheDir(): string;
/** A file's ELF e_machine, or null when it is no ELF file. */
export function elfMachine(path: string): number | null;
export function nodeBinary(version: string, arch: string): Promise<string>;
export function buildRelease(options?: { root?: string; dir?: string }): Promise<{ version: string; nodeVersion: string; files: string[]; sums: string }>;
