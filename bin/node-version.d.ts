/** Exits with one line on stderr (and status 1) unless this Node.js is >= 22.19 (see node-version.js). */
export function exitUnlessSupportedNode(program: string, hint?: string, version?: string): void;
