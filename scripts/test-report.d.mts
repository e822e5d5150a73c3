/** Types of scripts/test-report.mjs (the parts the TypeScript side uses). */
export const DURATIONS_FILE: string;
export function machineDurationsFile(): string;
/** One vitest run's report, as the reporter writes it. */
export interface TestRunReport {
  reason: string;
  unhandledErrors: number;
  modules: {
    project: string;
    file: string;
    start: number | null;
    end: number | null;
    state: string;
    errors: number;
    tests: { name: string; state: string; ms: number; error?: string }[];
  }[];
}
export function readReport(path: string): TestRunReport | null;
export function failures(reports: (TestRunReport | null)[]): string[];
