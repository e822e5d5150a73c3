/** Types of test/support/test-plan.mjs: what `npm test` runs and what each part needs. */
export const KUBEADM_FILE: string;
export const OWN_STEPS: { project: string; files: string[]; builds: string[]; env: Record<string, string>; lane: string; title: string }[];
export function k0sJob(version: string, variant?: string | null): string;
export function k0sVersionsToRun(env?: Record<string, string | undefined>): import("../../scripts/k0s.mjs").K0sVersion[];
export const CONTRACT_FILES: string[];
export const FILE_BUILDS: Record<string, string[]>;
export const OWN_STEP_FILES: string[];
export function etcdJob(version: string): string;
export interface E2eProject {
  name: string;
  title: string;
  include: string[];
  exclude: string[];
  env: Record<string, string>;
  needs: string[];
  /** Steps of their own: the lane they run in (one at a time per lane). */
  lane?: string;
}
export function e2eProjects(env?: Record<string, string | undefined>): E2eProject[];
export function suiteOf(file: string): "unit" | "worker" | "e2e" | null;
export function fileBuilds(files: string[]): string[];
export function projectRuns(project: E2eProject, file: string): boolean;
