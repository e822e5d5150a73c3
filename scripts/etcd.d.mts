/** Types of scripts/etcd.mjs: the etcd binaries the project is tested against, one per minor version. */
export type EtcdMinorVersion = "3.4" | "3.5" | "3.6" | "3.7";

export interface EtcdPin {
  minor: EtcdMinorVersion;
  /** The exact release pinned in scripts/etcd-versions.json. */
  release: string;
  /** "debian": Debian's etcd-server; "go": built from etcd's Go modules. */
  source: "debian" | "go";
  package?: string;
}

/** Oldest first. */
export const ETCD_MINORS: EtcdMinorVersion[];
export function etcdPin(version: string): EtcdPin;
export function normalizeMinor(version: string): EtcdMinorVersion;
export function etcdCacheDir(): string;
/** What `bin --version` reports ("3.6.16"), or null when it does not run. */
export function binaryRelease(bin: string): string | null;
/** The path of an etcd of this version already on this machine, or null (never builds). */
export function cachedEtcdPath(version: string): string | null;
/** The absolute path of this version's etcd (etcdctl beside it), building or installing it first if needed. */
export function ensureEtcd(version: string, options?: { log?: (line: string) => void }): Promise<string>;
export function listEtcd(options?: {
  build?: boolean;
  log?: (line: string) => void;
}): Promise<(EtcdPin & { path: string | null; reported: string | null; error: string | null })[]>;
