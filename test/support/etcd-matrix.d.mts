import type { EtcdMinorVersion } from "../../scripts/etcd.mjs";

export const PRIMARY_ETCD_VERSION: EtcdMinorVersion;
/** version → the e2e files it runs; `null` = every file. */
export const ETCD_MATRIX: Record<EtcdMinorVersion, string[] | null>;
export function etcdVersionsToRun(env?: Record<string, string | undefined>): EtcdMinorVersion[];
