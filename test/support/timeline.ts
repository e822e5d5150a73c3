/**
 * A run's timeline: who was admitted, killed, restarted or refused when, and how many etcd
 * members (voters, learners) there were over time. Written as JSON under test-results/ (git
 * ignored), with a short text rendering next to it.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface TimelineEntry {
  /** Milliseconds since the run started. */
  t: number;
  kind: string;
  node?: string;
  detail?: Record<string, unknown>;
}

export interface MemberSample {
  t: number;
  members: number;
  voters: number;
  learners: number;
  clusterId: string | null;
}

export class Timeline {
  readonly startedAt = new Date();
  readonly entries: TimelineEntry[] = [];
  readonly members: MemberSample[] = [];

  constructor(
    readonly scenario: string,
    readonly seed: number,
  ) {}

  now(): number {
    return Date.now() - this.startedAt.getTime();
  }

  add(kind: string, node?: string, detail?: Record<string, unknown>): void {
    this.entries.push({ t: this.now(), kind, ...(node ? { node } : {}), ...(detail ? { detail } : {}) });
  }

  /** Records a member count when it differs from the last one. */
  sample(s: Omit<MemberSample, "t">): void {
    const last = this.members[this.members.length - 1];
    if (last && last.members === s.members && last.voters === s.voters && last.learners === s.learners && last.clusterId === s.clusterId) return;
    this.members.push({ t: this.now(), ...s });
  }

  /** Writes `<dir>/<scenario>-<seed>.json` and `.txt`; returns the JSON path. */
  write(dir: string, summary: Record<string, unknown> = {}): string {
    mkdirSync(dir, { recursive: true });
    const base = join(dir, `${this.scenario}-${this.seed}`);
    const doc = {
      scenario: this.scenario,
      seed: this.seed,
      startedAt: this.startedAt.toISOString(),
      durationMs: this.now(),
      summary,
      entries: this.entries,
      members: this.members,
    };
    writeFileSync(`${base}.json`, `${JSON.stringify(doc, null, 2)}\n`);
    writeFileSync(`${base}.txt`, this.render(summary));
    return `${base}.json`;
  }

  render(summary: Record<string, unknown> = {}): string {
    const sec = (t: number) => `${(t / 1000).toFixed(1).padStart(6)}s`;
    const lines = [`${this.scenario} seed=${this.seed} started ${this.startedAt.toISOString()}`];
    const merged = [
      ...this.entries.map((e) => ({ t: e.t, text: `${(e.node ?? "").padEnd(8)} ${e.kind}${e.detail ? ` ${JSON.stringify(e.detail)}` : ""}` })),
      ...this.members.map((m) => ({
        t: m.t,
        text: `${"etcd".padEnd(8)} members=${m.members} voters=${m.voters} learners=${m.learners}${m.clusterId ? ` cluster=${m.clusterId}` : ""}`,
      })),
    ].sort((a, b) => a.t - b.t);
    for (const m of merged) lines.push(`${sec(m.t)} ${m.text}`);
    lines.push(`summary ${JSON.stringify(summary)}`);
    return `${lines.join("\n")}\n`;
  }
}
