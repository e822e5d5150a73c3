/** The environment variable that marks a step's processes. */
export const STEP_MARKER: string;
/** The processes (pid and command name) whose environment holds `STEP_MARKER=value`. */
export function markedProcesses(value: string): { pid: number; name: string }[];
/** SIGKILLs the processes marked `value`; returns what it found. */
export function stopMarkedProcesses(value: string): { pid: number; name: string }[];
