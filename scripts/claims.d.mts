/** Types of scripts/claims.mjs: machine-wide claims on names (ports, lab subnets, short locks). */
/** Where the claims live: one directory per kind. */
export const CLAIMS_DIR: string;
/** Claims `kind`/`key` for this process: true when it is now this process's, false while another live process holds it. */
export function claim(kind: string, key: string | number): boolean;
/** Ends this process's claim on `kind`/`key`. */
export function release(kind: string, key: string | number): void;
/** Runs `fn` while this process holds the machine-wide lock `name`. */
export function withMachineLock<T>(name: string, fn: () => T): T;
