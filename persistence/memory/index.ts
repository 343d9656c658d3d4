export { MemoryStore } from './MemoryStore.ts';
