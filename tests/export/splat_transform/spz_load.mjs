// Second reader of tests/export/test_splat_transform.py: nianticlabs/spz's own loader (the
// @adobe/spz WASM build that splat-transform depends on). Loads an SPZ file converting it to the
// frame named on the command line and writes what loadSpzFromBuffer returned as JSON.
//     node spz_load.mjs FILE.spz RDF|RUB|UNSPECIFIED OUT.json
import createModule from '@adobe/spz';
import { readFileSync, writeFileSync } from 'fs';

const [file, to, out] = process.argv.slice(2);
const spz = await createModule();
if (!(to in spz.CoordinateSystem)) throw new Error(`unknown coordinate system ${to}`);
const cloud = spz.loadSpzFromBuffer(new Uint8Array(readFileSync(file)), { to: spz.CoordinateSystem[to] });
const fields = ['positions', 'scales', 'rotations', 'alphas', 'colors', 'sh'];
const result = { numPoints: cloud.numPoints, shDegree: cloud.shDegree };
for (const name of fields) result[name] = Array.from(cloud[name]);
writeFileSync(out, JSON.stringify(result));
