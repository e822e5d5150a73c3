export declare const MACHINE_TMPDIR_ENV: string;
export declare function machineTmpdir(): string;
export interface StepTmpDirs {
  root: string;
  make(id: string): { dir: string; env: Record<string, string> };
  remove(id: string): { left: string[]; error: string | null };
  close(): void;
}
export declare function stepTmpDirs(base?: string): StepTmpDirs;
