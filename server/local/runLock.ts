// A per-Run lock: every change to one Run's record happens in order, one at a time, so a
// termination request, a phase step and a timeout can never interleave their writes.
export class RunLock {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}
