export const CONSOLE_ENTRY: string;
export const CONSOLE_MODULE: string;
/** The generated module's text (src/broker/console/script.generated.ts): the bundled console script. */
export function consoleModule(root?: string): Promise<string>;
