// The product version, compiled in from package.json so the bundled CLI needs no file reads.
import packageJson from '../package.json';

export const SERVER_VERSION: string = packageJson.version;
