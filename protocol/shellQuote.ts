// One word of a POSIX shell command line, for the commands the extension and the server hand a sandbox's shell
// (`sh -c`): the word as it is when it holds only characters no shell treats specially, else in single quotes.
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_./=:@%+,-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
