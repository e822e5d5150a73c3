/**
 * Long polls held in memory: a waiter per key (a ticket, or the audit log) is woken by a change
 * or by its own deadline, whichever comes first. Lost with the object; clients then poll again.
 * @module
 */
export class Waiters {
  readonly #byKey = new Map<string, Set<() => void>>();

  /** Resolves when `notify(key)` is called or after `ms`. */
  wait(key: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const set = this.#byKey.get(key) ?? new Set();
      this.#byKey.set(key, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0) this.#byKey.delete(key);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
  }

  /** How many waits are held now. */
  get size(): number {
    let n = 0;
    for (const set of this.#byKey.values()) n += set.size;
    return n;
  }

  notify(keys: Iterable<string>): void {
    for (const key of keys) for (const wake of [...(this.#byKey.get(key) ?? [])]) wake();
  }

  notifyAll(): void {
    this.notify([...this.#byKey.keys()]);
  }
}
