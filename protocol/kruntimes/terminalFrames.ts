// The frames and close codes of the interactive terminal socket (`GET P/pty`; the contract is in terminalSocket.ts):
// wire facts with no WebSocket client attached, so the gateway's terminal side can use them without loading `ws`.
import { z } from 'zod';

export const TerminalCloseCode = {
  /** The program exited (an `exit` frame came first), or the client ended the terminal. */
  normal: 1000,
  /** Another connection took the terminal over. */
  takenOver: 4001,
  /** The sandbox went away or its terminal failed. */
  failed: 1011,
} as const;

export const TerminalSignalSchema = z.enum(['SIGINT', 'SIGTERM', 'SIGKILL', 'SIGHUP', 'SIGQUIT']);
export type TerminalSignal = z.infer<typeof TerminalSignalSchema>;

/** Terminal sizes VS Code and terminals use; larger values are refused as malformed. */
const Dimension = z.number().int().min(1).max(10_000);

export const TerminalClientFrameSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('resize'), cols: Dimension, rows: Dimension }),
  z.strictObject({ type: z.literal('signal'), signal: TerminalSignalSchema }),
]);
export type TerminalClientFrame = z.infer<typeof TerminalClientFrameSchema>;

export const TerminalServerFrameSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('connected'), session: z.string().min(1), offset: z.number().int().min(0) }),
  z.object({ type: z.literal('exit'), exitCode: z.number().int() }),
  z.object({ type: z.literal('error'), code: z.string(), message: z.string() }),
]);
export type TerminalServerFrame = z.infer<typeof TerminalServerFrameSchema>;

/** A terminal session id as the gateway hands it out (and accepts it back). */
export const TerminalSessionIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/);
