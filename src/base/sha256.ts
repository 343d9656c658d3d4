/**
 * SHA-256, synchronous, everywhere: Node's one-shot `crypto.hash` when there (fast), else
 * @noble/hashes (a browser, a Worker, a Durable Object: WebCrypto's digest is asynchronous).
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';
import { nodeBuiltin } from './node.ts';

const oneShot = nodeBuiltin('node:crypto')?.hash;

/** The SHA-256 of `text` (as UTF-8), in lowercase hex. */
export const sha256Hex: (text: string) => string = oneShot
  ? (text) => oneShot('sha256', text, 'hex')
  : (text) => bytesToHex(sha256(utf8ToBytes(text)));
