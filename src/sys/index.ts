/// <reference types="node" preserve="true" />
// index.ts: `treeseal/sys`, the typed face of the native syscall layer.
export { sys, type Sys, type Stat, type StatxResult, type DirEntry, type PathArg } from './native.js';
export { fstatatEach } from './stat-each.js';
export * from './constants.js';
export { Fd } from './fd.js';
export { identityOf, sameIdentity, sameObject, type FileIdentity } from './identity.js';
export { isSystemError, hasCode, type SystemError } from './errno.js';
