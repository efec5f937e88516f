const t0=Date.now();
import { createEngine } from '@ratchet/engine';
const e = await createEngine({workflows:[]}); console.log('created', Date.now()-t0);
await e.migrate(); console.log('migrated', Date.now()-t0);
await e.close(); console.log('closed', Date.now()-t0);
