// One stream of a command's output as an MCP tool returns it: at most 1 MiB (the gateway's own cap),
// then the gateway's marker, so an agent sees that output is missing instead of a silent cut.
import { GatewayLimits } from '../../protocol/kruntimes/gateway';

export const OUTPUT_CAP_BYTES = GatewayLimits.maxOutputBytes;
export const TRUNCATION_MARKER = '\n[output truncated]\n';

export class CappedOutput {
  private readonly parts: Buffer[] = [];
  private kept = 0;
  private cut = false;

  constructor(private readonly cap = OUTPUT_CAP_BYTES) {}

  /** Keeps what fits under the cap; returns the bytes kept from this chunk (for progress). */
  push(chunk: Buffer): Buffer {
    if (this.cut) return Buffer.alloc(0);
    const room = this.cap - this.kept;
    const taken = chunk.length <= room ? chunk : chunk.subarray(0, room);
    if (taken.length < chunk.length) this.cut = true;
    if (taken.length > 0) {
      this.parts.push(taken);
      this.kept += taken.length;
    }
    return taken;
  }

  get truncated(): boolean {
    return this.cut;
  }

  /** The kept bytes as UTF-8 text, with the marker when anything was dropped. */
  text(): string {
    const body = Buffer.concat(this.parts).toString('utf8');
    return this.cut ? body + TRUNCATION_MARKER : body;
  }
}
