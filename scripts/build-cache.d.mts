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
/** Builds something once per machine under `<cache>/<key>.lock` in a scratch directory; `built()` first, then `make(work)`, which resolves with the cached path. */
export function buildOnce(options: {
  cache: string;
  key: string;
  what: string;
  locked?: string;
  tag: string;
  log: (line: string) => void;
  built: () => string | null;
  make: (work: string) => Promise<string>;
}): Promise<string>;
/** Writes a build's JSON record: `fields`, the Go version, when, and the seconds since `started`. */
export function writeBuildRecord(file: string, go: string, started: number, fields: Record<string, unknown>): void;
/** The environment of a Go build of a tool the tests run: GOWORK=off, no VCS stamp, no DWARF, GOGC=400 (unless set). */
export function goBuildEnv(env?: NodeJS.ProcessEnv, extraFlags?: string[]): NodeJS.ProcessEnv;
