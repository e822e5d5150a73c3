/** Types of scripts/k0s.mjs: the k0s releases the k0s tests run, built from shared/k0s's source archives. */
import type { EtcdMinorVersion } from "./etcd.mjs";

export type K0sVersion = "1.28" | "1.36";

export interface K0sPin {
  version: K0sVersion;
  /** The tag, "v1.28.14+k0s.0": also what `k0s version` says. */
  release: string;
  /** The source archive's file name in shared/k0s/. */
  archive: string;
  commit: string;
  sha256: string;
  /** The etcd minor version this release runs (scripts/etcd.mjs builds it). */
  etcd: EtcdMinorVersion;
  cgo: boolean;
  cgoCflags?: string;
  /** go.mod replaces: module → version. */
  replace?: Record<string, string>;
  goBindata?: string;
  emptyOffsets?: boolean;
  /** The components `k0s controller --disable-components` takes for a controller-only node of this release. */
  disable: string[];
}

export const K0S_VERSIONS: K0sVersion[];
export const PROJECT_GO_MODULE: string;
/** A command line the script does not accept (exit 2). */
export class UsageError extends Error {
  code: "usage";
}
/** "1.28", "v1.28.14+k0s.0", "1.28+broker" → the minor version and the variant (null: as tagged). */
export function parseK0sVersion(text: string): { version: K0sVersion; variant: string | null };
export function k0sPin(version: string): K0sPin;
export function k0sCacheDir(): string;
/** The directory holding the source archives, or null when none is found. */
export function k0sSourceDir(): string | null;
export function variantDir(version: string, variant: string): string;
export function k0sVariants(version: string): string[];
export function variantPatches(version: string, variant: string): string[];
export function buildKey(version: string, variant: string | null): string;
export function makeVariables(text: string): Record<string, string>;
export function k0sLdflags(release: string, variables: Record<string, string>, buildDate: string): string;
/** What `k0s version` says, or null when it does not run. */
export function reportedK0sVersion(bin: string): string | null;
/** The path of an already-built k0s (never builds). */
export function cachedK0sPath(version: string): string | null;
export function ensureK0s(version: string, options?: { log?: (line: string) => void }): Promise<string>;
export function listK0s(options?: {
  build?: boolean;
  log?: (line: string) => void;
  /** Only these releases (and their variants); every pinned one by default. */
  versions?: K0sVersion[];
}): Promise<{ name: string; release: string; path: string | null; reported: string | null; error: string | null }[]>;
export function sha256File(path: string): Promise<string>;
export function checkedArchive(pin: K0sPin): Promise<string>;
