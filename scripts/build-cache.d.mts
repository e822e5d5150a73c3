/** Types of scripts/build-cache.mjs: what the once-per-machine builds share. */
/** $XDG_CACHE_HOME or ~/.cache, under etcd-join-broker. */
export function projectCacheDir(): string;
/** Takes a lock file, waiting while a live process holds it (a dead holder's is taken over); resolves with its release function. */
export function lock(path: string, what: string, log: (line: string) => void, tag?: string): Promise<() => void>;
/** Runs one build step, its stderr passed through, `[tag] label: N s` logged every 20 s; rejects with the last lines of its stderr. */
export function run(
  cmd: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; label: string; log: (line: string) => void; tag: string },
): Promise<void>;
