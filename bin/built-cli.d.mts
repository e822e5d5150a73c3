export const BUILD_DIR: string;
export const ENTRY: string;
export const MANIFEST: string;
export function fileHash(path: string): string;
/** The built entry when the build in `root/dir` matches its sources, else null; `why` says which. */
export function freshBuild(root: string, dir?: string): { entry: string | null; why: string };
