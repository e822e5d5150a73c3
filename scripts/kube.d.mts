/** Types of scripts/kube.mjs: the Kubernetes binaries the kubeadm tests run, at the pinned release. */
import type { EtcdMinorVersion } from "./etcd.mjs";

export type KubeBinary = "kubeadm" | "kube-apiserver";

export interface KubePin {
  /** The pinned release, "1.37.2" (scripts/kube-versions.json). */
  release: string;
  /** The staging modules' version, "v0.37.2". */
  staging: string;
  /** The etcd minor version this release's kubeadm deploys. */
  etcd: EtcdMinorVersion;
}

export const KUBE_BINARIES: KubeBinary[];
export const UNPUBLISHED_STAGING: string[];
/** A command line the script does not accept (exit 2). */
export class UsageError extends Error {
  code: "usage";
}
export function parseKubePins(text: string): KubePin;
export function kubePin(): KubePin;
export function kubeCacheDir(): string;
/** The modules kubernetes' go.mod replaces with ./staging directories, minus the unpublished ones. */
export function stagingModules(kubernetesGoMod: string): string[];
export function wrapperGoMod(kubernetesGoMod: string, pin: KubePin): string;
export function versionLdflags(release: string): string;
/** What the binary says its version is ("v1.37.2"), or null when it does not run. */
export function reportedVersion(name: KubeBinary, bin: string): string | null;
export function cachedKubePath(name: KubeBinary): string | null;
export function ensureKube(name: KubeBinary, options?: { log?: (line: string) => void }): Promise<string>;
export function ensureKubeEtcd(options?: { log?: (line: string) => void }): Promise<string>;
export function listKube(options?: {
  build?: boolean;
  log?: (line: string) => void;
}): Promise<{ name: KubeBinary | "etcd"; release: string; path: string | null; reported: string | null; error: string | null }[]>;
