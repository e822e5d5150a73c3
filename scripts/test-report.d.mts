/** Types of scripts/test-report.mjs (the parts the TypeScript side uses). */
export const DURATIONS_FILE: string;
export function machineDurationsFile(): string;
