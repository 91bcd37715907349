// The keys a terminal sends as escape sequences (arrows, Home/End, Delete, word moves, bracketed paste), named
// for the Sandbox terminal's line editor; any other CSI sequence is swallowed whole. Apart from LineEditor so
// the table reads on its own.

const ESC = '\x1b';

export type EscapeName =
  | 'left'
  | 'right'
  | 'up'
  | 'down'
  | 'home'
  | 'end'
  | 'delete'
  | 'wordLeft'
  | 'wordRight'
  | 'pasteStart'
  | 'pasteEnd'
  | 'ignored';

const ESCAPES: [string, EscapeName][] = [
  ['\x1b[200~', 'pasteStart'],
  ['\x1b[201~', 'pasteEnd'],
  ['\x1b[1;5D', 'wordLeft'],
  ['\x1b[1;5C', 'wordRight'],
  ['\x1bb', 'wordLeft'],
  ['\x1bf', 'wordRight'],
  ['\x1b[3~', 'delete'],
  ['\x1b[1~', 'home'],
  ['\x1b[4~', 'end'],
  ['\x1b[7~', 'home'],
  ['\x1b[8~', 'end'],
  ['\x1b[A', 'up'],
  ['\x1b[B', 'down'],
  ['\x1b[C', 'right'],
  ['\x1b[D', 'left'],
  ['\x1b[H', 'home'],
  ['\x1b[F', 'end'],
  ['\x1bOA', 'up'],
  ['\x1bOB', 'down'],
  ['\x1bOC', 'right'],
  ['\x1bOD', 'left'],
  ['\x1bOH', 'home'],
  ['\x1bOF', 'end'],
];

export function matchEscape(text: string): { name: EscapeName; length: number } | undefined {
  if (text[0] !== ESC) return undefined;
  for (const [seq, name] of ESCAPES) if (text.startsWith(seq)) return { name, length: seq.length };
  // Any other CSI sequence (e.g. focus events, F-keys): swallow it whole.
  // eslint-disable-next-line no-control-regex -- terminal input is control characters
  const csi = /^\x1b\[[0-9;?]*[ -/]*[@-~]/.exec(text);
  if (csi) return { name: 'ignored', length: csi[0].length };
  return { name: 'ignored', length: Math.min(2, text.length) };
}
