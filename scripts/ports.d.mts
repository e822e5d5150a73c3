/** Distinct free loopback ports, held open together while picking. */
export function freePorts(count: number): Promise<number[]>;
