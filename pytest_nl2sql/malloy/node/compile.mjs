// The Malloy compiler as a JSON-lines server for pytest-nl2sql (pytest_nl2sql/malloy/compiler.py).
//
// Run as `node compile.mjs HOME`. One request per line on stdin, one response per line on stdout, in order:
//   {"id": 1, "query": "run: singer -> {...}", "model": "source: ...", "dialect": "duckdb",
//    "schema": "KEY", "tables": [{"name": "singer", "columns": [{"name": "id", "type": "number"}]}]}
//   -> {"id": 1, "sql": "SELECT ..."} or {"id": 1, "error": {"message": "...", "line": 3, "in": "query"}}
// (`line` is 1-based, `in` says which text it is in: "query" or "model"; both null when Malloy gives none).
// `tables` may be left out once a schema key has been sent: the server keeps each schema by key.
// `max_sql` (optional): SQL longer than this many characters is an error, not an answer.
// {"id": 0, "hello": true} -> {"id": 0, "version": "0.0.431"} (a start-up check, once a first query is compiled).
//
// No database is ever opened here: the only connection answers Malloy's schema requests from the
// tables the request carries, under whatever connection name the model uses (it means the case's
// database), in the dialect the request names.

import {createRequire} from 'node:module';
import * as path from 'node:path';
import * as readline from 'node:readline';

// stdout carries the answers only: whatever the compiler logs goes to stderr.
console.log = console.info = console.debug = console.error;

// The compiler is installed in a home of its own (`nl2sql malloy-setup`, pytest_nl2sql/malloy/home.py),
// given as the first argument; this script ships with the plugin.
const home = process.argv[2];
const {Malloy, PostgresDialect, Runtime, decodeDottedTablePath, registerDialect} =
  createRequire(path.join(home, 'package.json'))('@malloydata/malloy');

// Malloy's postgres dialect wraps every result row in one JSON column (a last stage
// `SELECT row_to_json(finalStage) as row FROM ...`), which its own Node runtime unpacks. The plugin
// runs the SQL itself and compares columns, so the last stage is left out: the SQL ends in the
// query's own SELECT, as it does for duckdb and mysql. (Malloy has no option for this.)
class PlainPostgresDialect extends PostgresDialect {
  constructor() {
    super();
    this.hasFinalStage = false;
  }
}
registerDialect(new PlainPostgresDialect());

const QUOTE = {duckdb: '"', postgres: '"', mysql: '`'};
const MODEL_URL = 'internal://nl2sql/model.malloy';
const MODELS_KEPT = 32;

const schemas = new Map(); // schema key -> Map(lower-cased table name -> [table, ...])
const models = new Map(); // model key -> ModelMaterializer, least recently used first

function indexTables(tables) {
  const byName = new Map();
  for (const table of tables) {
    const key = table.name.toLowerCase();
    byName.set(key, [...(byName.get(key) || []), table]);
  }
  return byName;
}

// The table a path in `table('…')` names: its last segment, exactly, else the one table whose
// name matches ignoring case (as SQLite, DuckDB and MySQL resolve an unquoted name).
function findTable(byName, dialect, tablePath) {
  let name = tablePath;
  if (tablePath.startsWith("'") && tablePath.endsWith("'")) {
    name = tablePath.slice(1, -1).replace(/''/g, "'");
  } else {
    const decoded = decodeDottedTablePath(tablePath, {
      quoteChar: QUOTE[dialect] || '"', escapeStyle: 'doubled', bareIdentRegex: /^[A-Za-z0-9_$]+/, dialectName: dialect,
    });
    if (decoded.ok) name = decoded.segments[decoded.segments.length - 1].value;
  }
  const candidates = byName.get(name.toLowerCase()) || [];
  return candidates.find(t => t.name === name) || (candidates.length === 1 ? candidates[0] : undefined);
}

function fieldDef(column) {
  const field = {name: column.name, type: column.type};
  if (column.numberType) field.numberType = column.numberType;
  if (column.rawType) field.rawType = column.rawType;
  return field;
}

class SchemaConnection {
  constructor(name, dialect, byName) {
    this.name = name;
    this.dialectName = dialect;
    this.byName = byName;
  }
  getDigest() { return `nl2sql:${this.name}:${this.dialectName}`; }
  async fetchSchemaForTables(missing) {
    const schemas = {};
    const errors = {};
    for (const [key, tablePath] of Object.entries(missing)) {
      const table = findTable(this.byName, this.dialectName, tablePath);
      if (table === undefined) {
        errors[key] = `no table ${tablePath} in the case's database`;
        continue;
      }
      schemas[key] = {
        type: 'table', name: key, tablePath, connection: this.name, dialect: this.dialectName,
        fields: table.columns.map(fieldDef),
      };
    }
    return {schemas, errors};
  }
  async fetchSchemaForSQLStruct(request) {
    return {error: `${this.name}.sql(...) is not supported: the compiler sees the schema, not the database (use a table)`};
  }
  async runSQL() { throw new Error('pytest-nl2sql compiles Malloy only: it never runs SQL in Node'); }
  isPool() { return false; }
  canPersist() { return false; }
  canStream() { return false; }
  async close() {}
  async idle() {}
  async estimateQueryCost() { return {}; }
  async fetchMetadata() { return {}; }
  async fetchTableMetadata() { return {}; }
}

function runtimeFor(text, dialect, byName) {
  const connections = new Map();
  const lookup = {
    async lookupConnection(name) {
      const key = name || 'duckdb';
      if (!connections.has(key)) connections.set(key, new SchemaConnection(key, dialect, byName));
      return connections.get(key);
    },
  };
  const urlReader = {async readURL(url) {
    if (url.toString() === MODEL_URL) return text;
    throw new Error(`cannot import ${url}: a model for pytest-nl2sql is one file`);
  }};
  return new Runtime({urlReader, connections: lookup});
}

function modelFor(request) {
  const key = JSON.stringify([request.schema, request.dialect, request.model]);
  let model = models.get(key);
  if (model !== undefined) {
    models.delete(key);
  } else {
    const byName = schemas.get(request.schema);
    const runtime = runtimeFor(request.model, request.dialect, byName);
    model = runtime.loadModel(new URL(MODEL_URL));
  }
  models.set(key, model);
  while (models.size > MODELS_KEPT) models.delete(models.keys().next().value);
  return model;
}

function problem(error) {
  const problems = (error && error.problems) || [];
  const first = problems.find(p => p.severity === 'error') || problems[0];
  if (first === undefined) return {message: String((error && error.message) || error), line: null, in: null};
  const at = first.at;
  const where = at === undefined ? null : at.url === MODEL_URL ? 'model' : 'query';
  return {message: first.message, line: at === undefined ? null : at.range.start.line + 1, in: where};
}

async function compile(request) {
  if (request.tables !== undefined) schemas.set(request.schema, indexTables(request.tables));
  if (!schemas.has(request.schema)) return {error: {message: `unknown schema ${request.schema}: send its tables`, line: null, in: null}};
  const model = modelFor(request);
  try {
    const query = model.loadQuery(request.query);
    const sql = await query.getSQL();
    if (typeof request.max_sql === 'number' && sql.length > request.max_sql) {
      const count = n => n.toLocaleString('en-US');
      return {error: {message: `the compiled SQL is ${count(sql.length)} characters long, over the ${count(request.max_sql)} a query may have`,
                      line: null, in: null}};
    }
    return {sql};
  } catch (error) {
    return {error: problem(error)};
  }
}

// The first compile in a process takes seconds (code loaded and compiled lazily), the next ones
// milliseconds: one is done at start-up, so that a query's time limit is not spent on it.
async function warmUp() {
  const request = {
    schema: '\u0000warm-up', dialect: 'duckdb', tables: [{name: 'w', columns: [{name: 'k', type: 'number'}]}],
    model: "source: w is duckdb.table('w') extend { primary_key: k; join_one: v is duckdb.table('w') on k = v.k }",
    query: 'run: w -> { group_by: v.k; aggregate: n is count(); nest: x is { group_by: k; aggregate: s is k.sum() } }',
  };
  try {
    const compiled = await compile(request);
    if (compiled.error) console.error(`warm-up: ${compiled.error.message}`);
  } catch (error) {
    console.error(`warm-up: ${(error && error.message) || error}`);
  } finally {
    schemas.delete(request.schema);
    models.delete(JSON.stringify([request.schema, request.dialect, request.model]));
  }
}

async function handle(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (error) {
    return {id: null, error: {message: `not JSON: ${error.message}`, line: null, in: null}};
  }
  if (request.hello) {
    await warmUp();
    return {id: request.id, version: Malloy.version};
  }
  try {
    return {id: request.id, ...(await compile(request))};
  } catch (error) {
    return {id: request.id, error: {message: `the compiler failed: ${(error && error.message) || error}`, line: null, in: null}};
  }
}

process.stdout.on('error', () => process.exit(0)); // the plugin went away
const lines = readline.createInterface({input: process.stdin, terminal: false});
let queue = Promise.resolve();
lines.on('line', line => {
  if (!line.trim()) return;
  queue = queue.then(async () => {
    // A compile may never wait for I/O: without this turn of the event loop, queued requests would
    // run one after another before the end of the input was noticed.
    await new Promise(resolve => setImmediate(resolve));
    process.stdout.write(JSON.stringify(await handle(line)) + '\n');
  });
});
// The end of the input: the plugin closed it, or it died. What is queued is nobody's any more.
lines.on('close', () => process.exit(0));
