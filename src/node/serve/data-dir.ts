/**
 * The data directory of `join-broker serve`: its layout, its format version, and the lock that
 * one `serve` at a time uses it.
 *
 *     DIR/join-broker-data.json        format version (and who wrote it)
 *     DIR/serve.lock                   the running serve (created exclusively; see dir-lock.ts)
 *     DIR/admin-token                  the admin token, when none is given (made on the first start)
 *     DIR/restored.json                the last restore of a backup into DIR (`serve restore`)
 *     DIR/durable-objects/             workerd's SQLite files: one per cluster, plus the alarms
 *     DIR/run/                         written at every start: bundle, workerd config, pid files
 *
 * Everything worth a backup is the version file and `durable-objects/`; `run/` is rebuilt, and
 * only in a directory that has the version file (one serve made): a `run/` found in a directory
 * being adopted is someone else's, and the directory is refused.
 * @module
 */
import { randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { BEARER_TOKEN_CHARACTERS, isBearerToken } from "../../shared/protocol/bearer.ts";
import { DirLock } from "../dir-lock.ts";
import { processArgv } from "../proc.ts";

/** The layout this code reads and writes. Raise it with a migration below when the layout changes. */
export const DATA_FORMAT = 1;
export const VERSION_FILE = "join-broker-data.json";

/** Layout migrations, from format `from` to `from + 1`, applied in order at start. */
const MIGRATIONS: { from: number; migrate(dir: string): void }[] = [];

export class DataDirError extends Error {
  override readonly name = "DataDirError";
  readonly code = "ERR_DATA_DIR";
}

export interface DataDir {
  root: string;
  storage: string;
  run: string;
  /** Formats this start migrated through (empty when none). */
  migrated: number[];
  created: boolean;
}

interface VersionRecord {
  format: number;
  createdBy: string;
  createdAt: string;
  writtenBy: string;
}

export function layout(dir: string) {
  const root = resolve(dir);
  return { root, storage: join(root, "durable-objects"), run: join(root, "run"), versionFile: join(root, VERSION_FILE), lockFile: join(root, LOCK_FILE) };
}

export const LOCK_FILE = "serve.lock";
export const RESTORE_FILE = "restored.json";

/** What `serve restore` leaves for every later start: which restore this is, when, from where. */
export interface RestoreRecord {
  /** New at every restore: each cluster takes note of each restore once (RESTORE_ID). */
  id: string;
  at: string;
  from: string | null;
}

/** The last restore of this data directory, or null when it was never restored. */
export function readRestore(root: string): RestoreRecord | null {
  const file = join(root, RESTORE_FILE);
  if (!existsSync(file)) return null;
  try {
    const record = JSON.parse(readFileSync(file, "utf8")) as RestoreRecord;
    if (typeof record.id === "string" && record.id.length >= 8) return record;
  } catch {
    /* described below */
  }
  throw new DataDirError(`${file} is not a restore record written by join-broker serve restore; run it again`);
}

/**
 * Restores the backup `from` (a copy of a data directory, taken while serve was stopped) into
 * `dir`, or, without `from`, marks `dir` itself as restored (its files were put back by hand).
 * Either way every cluster in it, at the next start, takes note of a restore it has not seen:
 * one that looks never bootstrapped gets no bootstrap until an admin decides (the state may be
 * older than the cluster). Refused while a serve runs on `dir`.
 */
export function restoreDataDir(dir: string, from: string | null, now = new Date()): RestoreRecord {
  const paths = layout(dir);
  const lock = lockDataDir(dir);
  try {
    const source = from === null ? null : layout(from);
    if (source) {
      if (source.root === paths.root)
        throw new DataDirError("--from names the data directory itself; without --from the directory is marked restored in place");
      if (!existsSync(source.versionFile) || !existsSync(source.storage)) {
        throw new DataDirError(`${source.root} has no ${VERSION_FILE} and durable-objects/: it is not a copy of a join-broker data directory`);
      }
    } else if (!existsSync(paths.versionFile)) {
      throw new DataDirError(`${paths.root} has no ${VERSION_FILE}: it is not a join-broker data directory`);
    }
    if (!existsSync(paths.versionFile)) {
      const strangers = readdirSync(paths.root).filter((name) => name !== LOCK_FILE && !name.startsWith("."));
      if (strangers.length) throw new DataDirError(`${paths.root} is not empty and has no ${VERSION_FILE}: restore into an empty or new directory`);
    }
    // The record first: a restore cut short still counts as one (and is simply run again).
    const record: RestoreRecord = { id: randomBytes(16).toString("hex"), at: now.toISOString(), from: source?.root ?? null };
    writeAtomically(join(paths.root, RESTORE_FILE), `${JSON.stringify(record, null, 2)}\n`);
    if (source) {
      rmSync(paths.versionFile, { force: true });
      rmSync(paths.storage, { recursive: true, force: true });
      rmSync(paths.run, { recursive: true, force: true });
      cpSync(source.storage, paths.storage, { recursive: true });
      const token = join(source.root, "admin-token");
      if (existsSync(token)) cpSync(token, join(paths.root, "admin-token"));
      // The version file last: until it is there, the directory is not one serve will open.
      cpSync(source.versionFile, paths.versionFile);
    }
    return record;
  } finally {
    lock.unlock();
  }
}

/** Another `serve` holds the data directory. */
export class DataDirLocked extends DataDirError {
  constructor(
    readonly root: string,
    readonly holderPid: number | null,
  ) {
    super(
      `another join-broker serve${holderPid ? ` (pid ${holderPid})` : ""} is using the data directory ${root}; if none is, remove ${join(root, LOCK_FILE)} and start again`,
    );
  }
}

/**
 * Takes the data directory for this `serve` (creating the directory when there is none): of two
 * serves started at once only one gets it, the other is refused with `DataDirLocked`. Released
 * by `unlock()` and, failing that, at process exit.
 */
export function lockDataDir(dir: string): DirLock {
  const paths = layout(dir);
  mkdirSync(paths.root, { recursive: true, mode: 0o700 });
  const lock = new DirLock(paths.lockFile, (pid) => new DataDirLocked(paths.root, pid));
  lock.lock();
  return lock;
}

/**
 * Creates the data directory, or checks and (when older) migrates one that exists. Refuses a
 * directory written by a newer join-broker, and a non-empty directory that is not a data directory.
 */
export function openDataDir(dir: string, softwareVersion: string, now = new Date()): DataDir {
  const paths = layout(dir);
  mkdirSync(paths.root, { recursive: true, mode: 0o700 });
  let record: VersionRecord;
  let created = false;
  const migrated: number[] = [];
  if (!existsSync(paths.versionFile)) {
    const strangers = readdirSync(paths.root).filter((name) => name !== LOCK_FILE && !name.startsWith("."));
    if (strangers.length) {
      throw new DataDirError(
        `${paths.root} is not empty and has no ${VERSION_FILE}: it is not a join-broker data directory (found ${strangers.slice(0, 3).join(", ")}). Use an empty or new directory.`,
      );
    }
    record = { format: DATA_FORMAT, createdBy: softwareVersion, createdAt: now.toISOString(), writtenBy: softwareVersion };
    created = true;
  } else {
    try {
      record = JSON.parse(readFileSync(paths.versionFile, "utf8")) as VersionRecord;
    } catch (e) {
      throw new DataDirError(`cannot read ${paths.versionFile}: ${(e as Error).message}`);
    }
    if (!Number.isInteger(record.format) || record.format < 1)
      throw new DataDirError(`${paths.versionFile} has no valid "format" (found ${JSON.stringify(record.format)})`);
    if (record.format > DATA_FORMAT) {
      throw new DataDirError(
        `${paths.root} was written by join-broker ${record.writtenBy ?? "?"} in data format ${record.format}; this join-broker (${softwareVersion}) reads format ${DATA_FORMAT} and older. Run that version or a newer one, or restore a backup made by this version.`,
      );
    }
    for (let format = record.format; format < DATA_FORMAT; format++) {
      const step = MIGRATIONS.find((m) => m.from === format);
      if (!step)
        throw new DataDirError(`${paths.root} is in data format ${format}, which this join-broker cannot migrate; upgrade through an intermediate version`);
      step.migrate(paths.root);
      migrated.push(format + 1);
    }
    record = { ...record, format: DATA_FORMAT, writtenBy: softwareVersion };
  }
  // The version file first: from then on the directory is serve's, and so is any run/ in it.
  writeAtomically(paths.versionFile, `${JSON.stringify(record, null, 2)}\n`);
  mkdirSync(paths.storage, { recursive: true, mode: 0o700 });
  rmSync(paths.run, { recursive: true, force: true });
  mkdirSync(paths.run, { recursive: true, mode: 0o700 });
  return { root: paths.root, storage: paths.storage, run: paths.run, migrated, created };
}

function writeAtomically(file: string, content: string): void {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, content, { mode: 0o600 });
  renameSync(tmp, file);
}

/**
 * The admin token kept in the data directory: read, or made (32 random bytes, base64url, mode
 * 0600) when there is none. `created` says whether it was made now.
 */
export function storedAdminToken(root: string): { token: string; file: string; created: boolean } {
  const file = join(root, "admin-token");
  if (existsSync(file)) {
    const token = readFileSync(file, "utf8").trim();
    if (token.length < 16 || !isBearerToken(token))
      throw new DataDirError(`${file} holds no admin token of at least 16 characters of ${BEARER_TOKEN_CHARACTERS}; delete it to have a new one made`);
    return { token, file, created: false };
  }
  const token = randomBytes(32).toString("base64url");
  writeAtomically(file, `${token}\n`);
  return { token, file, created: true };
}

/** Whether process `pid` is alive and its command line contains `needle` (Linux /proc; elsewhere: alive). */
export function processMatches(pid: number, needle: string): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
  return processArgv(pid)?.join(" ").includes(needle) ?? true;
}

/** The pid recorded in `file`, or null. */
export function readPid(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}
