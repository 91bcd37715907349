// A one-consumer async queue: a producer pushes values as they arrive (socket frames) and
// finally ends or fails it; the consumer iterates with `for await`. Values pushed before the
// consumer pulls are kept in order, so a fast producer never loses an event.

export class EventChannel<T> {
  private readonly values: T[] = [];
  private ended = false;
  private failure: { error: unknown } | undefined;
  private wake: (() => void) | undefined;

  get closed(): boolean {
    return this.ended || this.failure !== undefined;
  }

  push(value: T): void {
    if (this.closed) return;
    this.values.push(value);
    this.notify();
  }

  end(): void {
    if (this.closed) return;
    this.ended = true;
    this.notify();
  }

  fail(error: unknown): void {
    if (this.closed) return;
    this.failure = { error };
    this.notify();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      const next = this.values.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (this.failure) throw this.failure.error;
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}
