//! The results store: every result `run`, `curve`, `agg`, `sweep` and
//! `ping` produce, kept in one SQLite database (rusqlite's bundled SQLite,
//! so the static musl build has it too), for `thrum history`, `show` and
//! `compare`.
//!
//! One row a run in `runs` (a short id, the time, the command, test,
//! target, labels, name, the headline figures in columns, its settings key
//! ([`settings`]), every figure of its kind ([`figures`]) and the whole
//! result JSON), and its labels once more in `labels` for filtering. The
//! schema is versioned by SQLite's `user_version` and brought up to date by
//! [`MIGRATIONS`] on open; docs/history.md writes it down. WAL mode and a
//! busy timeout let several thrum processes save at once; a save is one
//! `BEGIN IMMEDIATE` transaction, so a process killed in it leaves the
//! database as it was. The store never costs a run: the caller turns any
//! error here into a warning ([`Store::open`] and [`Store::save`] say the
//! path and the problem).

pub mod changes;
pub mod compare;
pub mod figures;
pub mod headline;
pub mod sets;
pub mod settings;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

pub use headline::Headline;

/// How long a save waits for another process's write to end.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// One step of the schema: SQL, then (for what SQL cannot compute, such
/// as a hash of each stored document's settings) code over the rows.
struct Migration {
    sql: &'static str,
    then: Option<fn(&Connection) -> rusqlite::Result<()>>,
}

/// Each migration takes the schema from its index to the next version
/// (`user_version` 0 is an empty file). Only ever append.
const MIGRATIONS: &[Migration] = &[
    // 0 → 1
    Migration {
        sql: V1,
        then: None,
    },
    // 1 → 2: each run's settings key (noise is learned only from runs of
    // the same settings) and every figure of its kind; a capacity run's
    // throughput column holds the estimate, not the probe's own load.
    Migration {
        sql: "ALTER TABLE runs ADD COLUMN settings TEXT NOT NULL DEFAULT '';
              ALTER TABLE runs ADD COLUMN figures TEXT NOT NULL DEFAULT '{}';
              CREATE INDEX runs_by_settings ON runs (settings);",
        then: Some(fill_v2),
    },
];

/// Version 1's tables.
const V1: &str = "CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        time_unix_s REAL NOT NULL,
        command TEXT NOT NULL,
        test TEXT NOT NULL,
        target TEXT NOT NULL,
        name TEXT,
        labels TEXT NOT NULL,
        schema TEXT NOT NULL,
        ok INTEGER NOT NULL,
        throughput_bps REAL,
        transactions_per_s REAL,
        latency_p50_ns REAL,
        latency_p99_ns REAL,
        loss_percent REAL,
        local_cpu_percent REAL,
        remote_cpu_percent REAL,
        local_service_demand REAL,
        remote_service_demand REAL,
        service_demand_unit TEXT,
        result TEXT NOT NULL
    );
    CREATE INDEX runs_by_time ON runs (time_unix_s);
    CREATE TABLE labels (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (run_id, key)
    );
    CREATE INDEX labels_by_pair ON labels (key, value);";

/// Version 2's rows: the settings key and figures of every stored run,
/// from its document, and a capacity run's estimate in `throughput_bps`
/// (until version 2 it held the probe's own load: 963 kbit/s stored where
/// the estimate read 89.21 Mbit/s). A document that does not parse keeps
/// the defaults (no settings, no figures).
fn fill_v2(conn: &Connection) -> rusqlite::Result<()> {
    let rows: Vec<(String, String, String)> = conn
        .prepare("SELECT id, test, result FROM runs")?
        .query_map([], |r| Ok((text(r, 0)?, text(r, 1)?, text(r, 2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut update = conn.prepare("UPDATE runs SET settings = ?2, figures = ?3 WHERE id = ?1")?;
    let mut capacity = conn.prepare("UPDATE runs SET throughput_bps = ?2 WHERE id = ?1")?;
    for (id, test, result) in rows {
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&result) else {
            continue;
        };
        update.execute(params![id, settings::key(&doc), figures_json(&doc)])?;
        if test == "capacity" {
            capacity.execute(params![id, Headline::of(&doc).throughput_bps])?;
        }
    }
    Ok(())
}

/// The `figures` column of a document.
fn figures_json(doc: &serde_json::Value) -> String {
    serde_json::to_string(&figures::stored(doc)).expect("figures serialize")
}

/// The schema version this thrum writes.
pub const VERSION: i64 = MIGRATIONS.len() as i64;

/// Labels, sorted by key: `--label KEY=VALUE`.
pub type Labels = BTreeMap<String, String>;

/// Where the store is when `--db` is not given: `$THRUM_DB`, else
/// `$XDG_DATA_HOME/thrum/results.db`, else
/// `~/.local/share/thrum/results.db`.
pub fn default_path() -> Result<PathBuf, String> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = var("THRUM_DB") {
        return Ok(PathBuf::from(p));
    }
    if let Some(d) = var("XDG_DATA_HOME") {
        return Ok(Path::new(&d).join("thrum/results.db"));
    }
    match var("HOME") {
        Some(h) => Ok(Path::new(&h).join(".local/share/thrum/results.db")),
        None => Err(
            "no $THRUM_DB, $XDG_DATA_HOME or $HOME to find the results store by (--db PATH names one)"
                .into(),
        ),
    }
}

/// What one run is saved as.
#[derive(Clone, Debug)]
pub struct Record<'a> {
    /// `run`, `curve`, `agg`, `sweep` or `ping`.
    pub command: &'a str,
    /// The test (`tcp_rr`, a mix's name, `ping`, …).
    pub test: String,
    /// The server (or host) as given, `embedded` for an embedded server.
    pub target: String,
    pub name: Option<String>,
    pub labels: Labels,
    /// The result document as the command writes it with `--json`.
    pub doc: &'a serde_json::Value,
}

/// A stored run as `history` lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub id: String,
    /// When it was saved, UTC, RFC 3339 (`2026-11-26T14:32:01Z`).
    pub time: String,
    pub time_unix_s: f64,
    pub command: String,
    pub test: String,
    pub target: String,
    pub name: Option<String>,
    pub labels: Labels,
    /// The result's `schema`.
    pub schema: String,
    /// The run ended without an error.
    pub ok: bool,
    #[serde(flatten)]
    pub headline: Headline,
    /// Its settings key: runs with the same one ran with the same options
    /// (labels, name, target and store flags aside).
    pub settings: String,
    /// Every figure of its kind, by name ([`figures`]).
    pub figures: figures::StoredFigures,
}

/// Which runs `history` lists.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub test: Option<String>,
    pub target: Option<String>,
    pub labels: Labels,
    pub since_unix_s: Option<f64>,
    pub until_unix_s: Option<f64>,
    /// Newest first, at most this many.
    pub last: Option<u32>,
    /// Only runs that ended without an error.
    pub ok_only: bool,
}

/// An open store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// An error of the store, said with its path.
fn at(path: &Path, what: &str, e: impl std::fmt::Display) -> String {
    format!("results store {}: {what}: {e}", path.display())
}

impl Store {
    /// Open for saving: create it if missing (and its directory, for the
    /// default store only: see [`check_place`]), and migrate.
    pub fn open(path: &Path) -> Result<Store, String> {
        check_place(path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.exists()
        {
            std::fs::create_dir_all(dir).map_err(|e| at(path, "cannot create its directory", e))?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| opening(path, e))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
        };
        store.setup().map_err(|e| opening(path, e))?;
        Ok(store)
    }

    /// Open an existing store read-only, for the commands that only read
    /// it (`history`, `show`, `compare`, `run --baseline`): a store on a
    /// read-only mount is listed, and a listing never writes (no journal
    /// mode set, no migration). A store whose schema is older than this
    /// thrum's is refused with what to do: one save migrates it.
    pub fn open_existing(path: &Path) -> Result<Store, String> {
        if is_link(path) {
            return Err(link_refused(path));
        }
        if !path.exists() {
            return Err(format!(
                "results store {}: no such file (no run saved yet, or --db/$THRUM_DB names another)",
                path.display()
            ));
        }
        let conn = read_only(path).map_err(|e| {
            if cannot_open(&e) && wal_holds_frames(path) {
                at(
                    path,
                    "cannot read",
                    "its -wal file holds saves not yet in the main file, and its directory is read-only, so SQLite cannot create the -shm file it reads them with; copy the store with its -wal file somewhere writable to read it",
                )
            } else {
                opening(path, e)
            }
        })?;
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| opening(path, e))?;
        if v > VERSION {
            return Err(at(path, "cannot use", newer(v)));
        }
        if v < VERSION {
            return Err(at(
                path,
                "cannot read",
                format!(
                    "its schema is version {v}, older than this thrum's {VERSION}; the reading commands open the store read-only, so it needs one write to migrate first (any run saved to it with this thrum)"
                ),
            ));
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// Copy the whole store into a new file `to` (`history --backup`),
    /// consistent as of one moment even while another thrum saves (SQLite's
    /// `VACUUM INTO`, which reads through the WAL, on this read-only
    /// connection), and compacted. `to` must not exist.
    pub fn backup(&self, to: &Path) -> Result<(), String> {
        if std::fs::symlink_metadata(to).is_ok() {
            return Err(format!(
                "--backup {}: it exists (the backup is written to a new file only)",
                to.display()
            ));
        }
        // A relative name as ./NAME: the connection may take URIs (the
        // immutable fallback of [`read_only`]), and `file:x` would be one.
        let name = if to.is_relative() {
            Path::new(".").join(to)
        } else {
            to.to_path_buf()
        };
        let name = name
            .to_str()
            .ok_or_else(|| format!("--backup {}: not a UTF-8 path", to.display()))?;
        self.conn
            .execute("VACUUM INTO ?1", [name])
            .map(drop)
            .map_err(|e| format!("--backup {}: {e}", to.display()))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn setup(&self) -> rusqlite::Result<()> {
        self.conn.busy_timeout(BUSY_TIMEOUT)?;
        // WAL: readers do not block the writer, and writers queue on the
        // busy timeout. Answers the mode it is in (a row), so query it.
        let _: String = self
            .conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        // NORMAL: a commit in WAL mode does not wait for the disk (a
        // crash of the process loses nothing; a power cut may lose the
        // last saves). The WAL is checkpointed after each save and when
        // the last connection closes (SQLite's default, which then
        // deletes the -wal file): the main file alone then holds every
        // run, so a copy of it is a backup. Its fsyncs cost ~60 ms at the
        // end of a command, beside no measurement.
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        self.migrate()
    }

    /// Bring the schema to [`VERSION`], each step in a transaction of its
    /// own (another process may be migrating at the same time: the
    /// version is read again once the write lock is held).
    fn migrate(&self) -> rusqlite::Result<()> {
        loop {
            let v: i64 = self
                .conn
                .query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if v >= VERSION {
                if v > VERSION {
                    return Err(rusqlite::Error::InvalidParameterName(newer(v)));
                }
                return Ok(());
            }
            self.conn.execute_batch("BEGIN IMMEDIATE")?;
            let step = || -> rusqlite::Result<()> {
                let v: i64 = self
                    .conn
                    .query_row("PRAGMA user_version", [], |r| r.get(0))?;
                if v < VERSION {
                    let m = &MIGRATIONS[v as usize];
                    self.conn.execute_batch(m.sql)?;
                    if let Some(then) = m.then {
                        then(&self.conn)?;
                    }
                    self.conn.pragma_update(None, "user_version", v + 1)?;
                }
                Ok(())
            };
            match step() {
                Ok(()) => self.conn.execute_batch("COMMIT")?,
                Err(e) => {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    return Err(e);
                }
            }
        }
    }

    /// Save one run; its new id.
    pub fn save(&self, rec: &Record) -> Result<String, String> {
        self.save_inner(rec)
            .map_err(|e| at(&self.path, "cannot save the run", e))
    }

    fn save_inner(&self, rec: &Record) -> rusqlite::Result<String> {
        let h = Headline::of(rec.doc);
        let schema = rec.doc["schema"].as_str().unwrap_or_default();
        let ok = headline::ok(rec.doc);
        let labels = serde_json::to_string(&rec.labels).expect("labels serialize");
        let result = serde_json::to_string(rec.doc).expect("a JSON value serializes");
        let settings = settings::key(rec.doc);
        let figures = figures_json(rec.doc);
        let time = crate::clock::unix_now();
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let body = || -> rusqlite::Result<String> {
            let id = loop {
                let id = new_id();
                let taken = self
                    .conn
                    .query_row("SELECT 1 FROM runs WHERE id = ?1", [&id], |_| Ok(()))
                    .optional()?
                    .is_some();
                if !taken {
                    break id;
                }
            };
            self.conn.execute(
                "INSERT INTO runs (id, time_unix_s, command, test, target, name, labels, schema, ok,
                    throughput_bps, transactions_per_s, latency_p50_ns, latency_p99_ns, loss_percent,
                    local_cpu_percent, remote_cpu_percent, local_service_demand,
                    remote_service_demand, service_demand_unit, result, settings, figures)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                    ?17, ?18, ?19, ?20, ?21, ?22)",
                params![
                    id,
                    time,
                    rec.command,
                    rec.test,
                    rec.target,
                    rec.name,
                    labels,
                    schema,
                    ok,
                    h.throughput_bps,
                    h.transactions_per_s,
                    h.latency_p50_ns,
                    h.latency_p99_ns,
                    h.loss_percent,
                    h.local_cpu_percent,
                    h.remote_cpu_percent,
                    h.local_service_demand,
                    h.remote_service_demand,
                    h.service_demand_unit,
                    result,
                    settings,
                    figures,
                ],
            )?;
            for (k, v) in &rec.labels {
                self.conn.execute(
                    "INSERT INTO labels (run_id, key, value) VALUES (?1, ?2, ?3)",
                    params![id, k, v],
                )?;
            }
            test_pause();
            Ok(id)
        };
        match body() {
            Ok(id) => {
                self.conn.execute_batch("COMMIT")?;
                // Into the main file now, even while another process has
                // the store open (its close would otherwise be the one to
                // checkpoint). PASSIVE: it never waits for a reader; what
                // a reader holds back is checkpointed by a later close.
                let _ = self
                    .conn
                    .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                Ok(id)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// The runs `f` selects, newest first.
    pub fn list(&self, f: &Filter) -> Result<Vec<Row>, String> {
        self.list_inner(f)
            .map_err(|e| at(&self.path, "cannot read", e))
    }

    fn list_inner(&self, f: &Filter) -> rusqlite::Result<Vec<Row>> {
        let mut sql = format!("SELECT {COLUMNS} FROM runs WHERE 1");
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        let mut arg = |sql: &mut String, cond: &str, v: rusqlite::types::Value| {
            args.push(v);
            sql.push_str(&cond.replace('?', &format!("?{}", args.len())));
        };
        if let Some(t) = &f.test {
            arg(&mut sql, " AND test = ?", t.clone().into());
        }
        if let Some(t) = &f.target {
            arg(&mut sql, " AND target = ?", t.clone().into());
        }
        if let Some(s) = f.since_unix_s {
            arg(&mut sql, " AND time_unix_s >= ?", s.into());
        }
        if let Some(u) = f.until_unix_s {
            arg(&mut sql, " AND time_unix_s <= ?", u.into());
        }
        if f.ok_only {
            sql.push_str(" AND ok = 1");
        }
        for (k, v) in &f.labels {
            arg(
                &mut sql,
                " AND EXISTS (SELECT 1 FROM labels WHERE run_id = runs.id AND key = ?",
                k.clone().into(),
            );
            arg(&mut sql, " AND value = ?)", v.clone().into());
        }
        sql.push_str(" ORDER BY time_unix_s DESC, rowid DESC");
        if let Some(n) = f.last {
            sql.push_str(&format!(" LIMIT {n}"));
        }
        let mut st = self.conn.prepare(&sql)?;
        let rows = st
            .query_map(rusqlite::params_from_iter(args), row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// One run and its result document, by id (or a unique prefix of one).
    pub fn get(&self, id: &str) -> Result<Option<(Row, serde_json::Value)>, String> {
        let found = (|| -> rusqlite::Result<Vec<(Row, String)>> {
            let mut st = self.conn.prepare(&format!(
                "SELECT {COLUMNS}, result FROM runs WHERE id = ?1 OR (length(?1) >= 4 AND id LIKE ?1 || '%') LIMIT 2"
            ))?;
            st.query_map([id], |r| Ok((row(r)?, text(r, COLUMN_COUNT)?)))?
                .collect()
        })()
        .map_err(|e| at(&self.path, "cannot read", e))?;
        match found.len() {
            0 => Ok(None),
            1 => {
                let (row, text) = found.into_iter().next().expect("one");
                let mut doc: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|e| at(&self.path, &format!("run {id}: stored result"), e))?;
                crate::text::escape_json_strings(&mut doc);
                Ok(Some((row, doc)))
            }
            _ => Err(format!(
                "'{}' is the start of more than one stored run's id: give more of it",
                crate::text::echo(id)
            )),
        }
    }

    /// The error-free runs labelled `key=value` (among others), newest
    /// first: of `test` and against `target` where given, at most `last`.
    pub fn labelled(
        &self,
        key: &str,
        value: &str,
        test: Option<&str>,
        target: Option<&str>,
        last: Option<u32>,
    ) -> Result<Vec<Row>, String> {
        let mut labels = Labels::new();
        labels.insert(key.to_string(), value.to_string());
        let f = Filter {
            test: test.map(str::to_string),
            target: target.map(str::to_string),
            labels,
            ok_only: true,
            last,
            ..Filter::default()
        };
        self.list(&f)
    }

    /// The newest (at most `limit`) error-free runs of one command, test
    /// and target with the settings key `settings`, grouped by their
    /// labels: what run-to-run noise is learned from.
    pub fn pool(
        &self,
        command: &str,
        test: &str,
        target: &str,
        settings: &str,
        limit: u32,
    ) -> Result<compare::Pool, String> {
        let runs = (|| -> rusqlite::Result<Vec<(String, String)>> {
            let mut st = self.conn.prepare(&format!(
                "SELECT labels, figures FROM runs WHERE settings = ?1 AND command = ?2
                 AND test = ?3 AND target = ?4 AND ok = 1
                 ORDER BY time_unix_s DESC, rowid DESC LIMIT {limit}"
            ))?;
            st.query_map(params![settings, command, test, target], |r| {
                Ok((text(r, 0)?, text(r, 1)?))
            })?
            .collect()
        })()
        .map_err(|e| at(&self.path, "cannot read", e))?;
        let mut groups: BTreeMap<String, Vec<BTreeMap<String, f64>>> = BTreeMap::new();
        for (labels, figures) in runs {
            let figures: figures::StoredFigures =
                serde_json::from_str(&figures).unwrap_or_default();
            groups
                .entry(labels)
                .or_default()
                .push(figures.into_iter().map(|(k, v)| (k, v.value)).collect());
        }
        Ok(compare::Pool {
            settings: settings.to_string(),
            groups: groups.into_values().collect(),
        })
    }
}

/// Why a schema version `v` above [`VERSION`] is refused.
fn newer(v: i64) -> String {
    format!("schema version {v} was written by a newer thrum (this one reads up to {VERSION})")
}

/// The error of opening `path`, a symbolic link's said in words.
fn opening(path: &Path, e: rusqlite::Error) -> String {
    if e.sqlite_error().map(|e| e.extended_code) == Some(rusqlite::ffi::SQLITE_CANTOPEN_SYMLINK) {
        return link_refused(path);
    }
    at(path, "cannot use", e)
}

/// Whether `path` itself is a symbolic link.
fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn link_refused(path: &Path) -> String {
    format!(
        "results store {} is a symbolic link: the store is opened without following links (O_NOFOLLOW), so that a link cannot turn the file it points to into a database; give --db (or $THRUM_DB) the file itself",
        path.display()
    )
}

/// The default store's directory (`$XDG_DATA_HOME/thrum`, else
/// `~/.local/share/thrum`), the only one a save creates.
fn default_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    var("XDG_DATA_HOME")
        .map(|d| Path::new(&d).join("thrum"))
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".local/share/thrum")))
}

/// Whether a store may be saved at `path`: not through a symbolic link
/// (SQLite would make the file it points to a database), and in a
/// directory that exists, unless it is the default store's, which the
/// first save creates. A directory named by `--db` or `$THRUM_DB` that
/// does not exist is more likely a typo than a wish for new folders.
pub fn check_place(path: &Path) -> Result<(), String> {
    if is_link(path) {
        return Err(link_refused(path));
    }
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.exists() || default_dir().is_some_and(|d| d == dir) {
        return Ok(());
    }
    Err(format!(
        "results store {}: its directory {} does not exist (only the default store's directory is created; --db and $THRUM_DB name a file in a directory that exists)",
        path.display(),
        dir.display()
    ))
}

/// A read-only connection to `path`, checked by reading it. A store in
/// WAL mode needs its `-shm` file, which a read-only directory cannot
/// create when the last writer removed it on close; then, when no `-wal`
/// file holds runs the main file lacks, the file is opened as immutable
/// (`?immutable=1`: nothing can write where nothing may be created).
fn read_only(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let probe = |c: Connection| -> rusqlite::Result<Connection> {
        c.busy_timeout(BUSY_TIMEOUT)?;
        c.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))?;
        Ok(c)
    };
    let first = Connection::open_with_flags(path, flags).and_then(probe);
    match first {
        Err(e) if cannot_open(&e) && !wal_holds_frames(path) => Connection::open_with_flags(
            format!("{}?immutable=1", file_uri(path)),
            flags | OpenFlags::SQLITE_OPEN_URI,
        )
        .and_then(probe),
        r => r,
    }
}

fn cannot_open(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::CannotOpen)
}

/// Whether `PATH-wal` exists with anything in it.
fn wal_holds_frames(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::symlink_metadata(wal).is_ok_and(|m| m.len() > 0)
}

/// `path` as an SQLite `file:` URI, every byte but unreserved ones and
/// `/` percent-encoded (`?`, `#` and `%` would end or change it).
fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut s = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

const COLUMNS: &str = "id, time_unix_s, command, test, target, name, labels, schema, ok,
    throughput_bps, transactions_per_s, latency_p50_ns, latency_p99_ns, loss_percent,
    local_cpu_percent, remote_cpu_percent, local_service_demand, remote_service_demand,
    service_demand_unit, settings, figures";
const COLUMN_COUNT: usize = 21;

/// Column `i` as text, whatever it holds: a store written by hand or by
/// another program may hold a number, a blob or bytes that are not UTF-8
/// where thrum writes text, and one such row must not stop a listing.
fn text(r: &rusqlite::Row, i: usize) -> rusqlite::Result<String> {
    use rusqlite::types::ValueRef;
    Ok(match r.get_ref(i)? {
        ValueRef::Null => String::new(),
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(x) => x.to_string(),
        ValueRef::Text(b) | ValueRef::Blob(b) => String::from_utf8_lossy(b).into_owned(),
    })
}

/// Column `i` as a number; None for anything else (as for NULL).
fn real(r: &rusqlite::Row, i: usize) -> rusqlite::Result<Option<f64>> {
    use rusqlite::types::ValueRef;
    Ok(match r.get_ref(i)? {
        ValueRef::Integer(n) => Some(n as f64),
        ValueRef::Real(x) => Some(x),
        _ => None,
    })
}

fn row(r: &rusqlite::Row) -> rusqlite::Result<Row> {
    let labels = text(r, 6)?;
    let time_unix_s = real(r, 1)?.unwrap_or(0.0);
    Ok(Row {
        id: text(r, 0)?,
        time: rfc3339(time_unix_s),
        time_unix_s,
        command: text(r, 2)?,
        test: text(r, 3)?,
        target: text(r, 4)?,
        name: match r.get_ref(5)? {
            rusqlite::types::ValueRef::Null => None,
            _ => Some(text(r, 5)?),
        },
        labels: serde_json::from_str(&labels).unwrap_or_default(),
        schema: text(r, 7)?,
        ok: real(r, 8)?.is_some_and(|x| x != 0.0),
        headline: Headline {
            throughput_bps: real(r, 9)?,
            transactions_per_s: real(r, 10)?,
            latency_p50_ns: real(r, 11)?,
            latency_p99_ns: real(r, 12)?,
            loss_percent: real(r, 13)?,
            local_cpu_percent: real(r, 14)?,
            remote_cpu_percent: real(r, 15)?,
            local_service_demand: real(r, 16)?,
            remote_service_demand: real(r, 17)?,
            service_demand_unit: r.get_ref(18)?.as_str().ok().map(str::to_string),
        },
        settings: text(r, 19)?,
        figures: serde_json::from_str(&text(r, 20)?).unwrap_or_default(),
    })
}

pub use crate::clock::rfc3339;

/// A short id: 8 hex digits from the time, the process id and 32 random
/// bits (the caller checks it is not taken).
fn new_id() -> String {
    let mut rnd = [0u8; 4];
    let _ = getrandom::fill(&mut rnd);
    let mut x = crate::clock::unix_now_ns() ^ (u64::from(std::process::id()) << 32);
    x ^= u64::from(u32::from_le_bytes(rnd)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // splitmix64's finaliser: every input bit moves the 32 kept.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    format!("{:08x}", x as u32)
}

/// The tests' hook: `THRUM_STORE_TEST_PAUSE_MS` holds a save open that
/// long inside its transaction, so a test can kill the process there.
fn test_pause() {
    if let Some(ms) = std::env::var("THRUM_STORE_TEST_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        eprintln!("results store: holding the save open for {ms} ms (THRUM_STORE_TEST_PAUSE_MS)");
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// The longest label key accepted (`--label KEY=VALUE`), in characters.
pub const LABEL_KEY_CHARS: usize = 64;
/// The longest label value accepted, in characters.
pub const LABEL_VALUE_CHARS: usize = 256;
/// The longest `--name` accepted, in characters.
pub const NAME_CHARS: usize = 256;

/// What a label is allowed to be, for the error messages.
const LABEL_RANGE: &str = "accepted: a key of 1 to 64 letters, digits, _, - and ., a value of 0 to 256 characters without control characters";

/// `KEY=VALUE` as a label is looked up (`history --label`, `compare
/// label:KEY=VALUE`): a key of letters, digits, `_`, `-` and `.`; any
/// value, so that a run saved by an older thrum, with a label a save would
/// now refuse, can still be found by it.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("'{}' is not KEY=VALUE", crate::text::echo(s)))?;
    if k.is_empty()
        || !k
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(format!(
            "'{}' is not a label key (letters, digits, _, - and . only)",
            crate::text::echo(k)
        ));
    }
    Ok((k.to_string(), v.to_string()))
}

/// `KEY=VALUE` of a run's `--label`, checked as [`parse_label`] does and
/// bounded: a key of at most [`LABEL_KEY_CHARS`], a value of at most
/// [`LABEL_VALUE_CHARS`] characters and no control character. Labels are
/// printed in tables and on one line each: a newline would split a row
/// (or forge one), an escape sequence would reach the terminal, and a
/// label of any length made every listing's column as wide.
pub fn parse_new_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = parse_label(s)?;
    if k.len() > LABEL_KEY_CHARS {
        return Err(format!(
            "the key '{}' is {} characters long ({LABEL_RANGE})",
            crate::text::echo(&k),
            k.len()
        ));
    }
    let n = v.chars().count();
    if n > LABEL_VALUE_CHARS {
        return Err(format!(
            "the value of '{k}' is {n} characters long ({LABEL_RANGE})"
        ));
    }
    if v.chars().any(char::is_control) {
        return Err(format!(
            "the value of '{k}', '{}', holds a control character ({LABEL_RANGE})",
            crate::text::echo(&v)
        ));
    }
    Ok((k, v))
}

/// `--name TEXT`, checked as a label's value is: at most [`NAME_CHARS`]
/// characters, no control character.
pub fn check_name(s: &str) -> Result<(), String> {
    let range = "accepted: 0 to 256 characters without control characters";
    let n = s.chars().count();
    if n > NAME_CHARS {
        return Err(format!("the name is {n} characters long ({range})"));
    }
    if s.chars().any(char::is_control) {
        return Err(format!(
            "the name '{}' holds a control character ({range})",
            crate::text::echo(s)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(bps: f64) -> serde_json::Value {
        serde_json::json!({
            "schema": "thrum.result.v1",
            "test": "tcp_stream",
            "summary": {"throughput_bps": bps, "error": null,
                        "local": {"cpu_util_percent": 3.0}, "remote": {}}
        })
    }

    #[test]
    fn saves_lists_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.db");
        let s = Store::open(&path).unwrap();
        let d = doc(1e8);
        let mut labels = Labels::new();
        labels.insert("cfg".into(), "a".into());
        let rec = Record {
            command: "run",
            test: "tcp_stream".into(),
            target: "embedded".into(),
            name: Some("first".into()),
            labels: labels.clone(),
            doc: &d,
        };
        let a = s.save(&rec).unwrap();
        let d2 = doc(2e8);
        let b = s
            .save(&Record {
                labels: Labels::new(),
                doc: &d2,
                ..rec.clone()
            })
            .unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 8);
        let all = s.list(&Filter::default()).unwrap();
        assert_eq!(all.iter().map(|r| &r.id).collect::<Vec<_>>(), [&b, &a]);
        assert_eq!(all[1].headline.throughput_bps, Some(1e8));
        assert_eq!(all[1].headline.local_cpu_percent, Some(3.0));
        let f = Filter {
            labels: labels.clone(),
            ..Filter::default()
        };
        assert_eq!(s.list(&f).unwrap().len(), 1);
        let set = s
            .labelled("cfg", "a", Some("tcp_stream"), None, None)
            .unwrap();
        assert_eq!(set.iter().map(|r| &r.id).collect::<Vec<_>>(), [&a]);
        assert!(
            s.labelled("cfg", "a", Some("tcp_rr"), None, None)
                .unwrap()
                .is_empty()
        );
        assert_eq!(all[1].figures["throughput"].value, 1e8);
        assert_eq!(all[0].settings, all[1].settings);
        let pool = s
            .pool("run", "tcp_stream", "embedded", &all[0].settings, 10)
            .unwrap();
        assert_eq!(pool.groups.iter().map(Vec::len).collect::<Vec<_>>(), [1, 1]);
        let (row, back) = s.get(&a[..5]).unwrap().unwrap();
        assert_eq!(row.name.as_deref(), Some("first"));
        assert_eq!(back, d);
        // Opened again: migrations do not run twice.
        drop(s);
        let s = Store::open(&path).unwrap();
        assert_eq!(s.list(&Filter::default()).unwrap().len(), 2);
        let v: i64 = s
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, VERSION);
    }

    #[test]
    fn a_file_that_is_not_a_database_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.db");
        std::fs::write(&path, vec![b'x'; 4096]).unwrap();
        let e = Store::open(&path).err().unwrap();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains("not a database"), "{e}");
    }

    fn record(d: &serde_json::Value) -> Record<'_> {
        Record {
            command: "run",
            test: "tcp_stream".into(),
            target: "embedded".into(),
            name: None,
            labels: Labels::new(),
            doc: d,
        }
    }

    #[test]
    fn the_main_file_alone_holds_every_saved_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.db");
        let d = doc(1e8);
        let s = Store::open(&path).unwrap();
        // Another connection open meanwhile: its close would not be the
        // last, so the save's own checkpoint is what counts.
        let other = Store::open_existing(&path).unwrap();
        for _ in 0..3 {
            s.save(&record(&d)).unwrap();
        }
        let copy = dir.path().join("copy.db");
        std::fs::copy(&path, &copy).unwrap();
        let c = Connection::open(&copy).unwrap();
        let n: i64 = c
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 3);
        drop(other);
        drop(s);
        let wal = dir.path().join("results.db-wal");
        assert!(!wal.exists(), "the last close removes the WAL");
    }

    #[test]
    fn reading_opens_read_only_and_never_migrates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.db");
        std::fs::write(&path, b"").unwrap();
        let e = Store::open_existing(&path).err().unwrap();
        assert!(
            e.contains("schema is version 0") && e.contains("one write"),
            "{e}"
        );
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            0,
            "nothing written"
        );
        Store::open(&path).unwrap();
        let s = Store::open_existing(&path).unwrap();
        assert!(s.list(&Filter::default()).unwrap().is_empty());
        let d = doc(1e8);
        assert!(s.save(&record(&d)).is_err(), "a read-only connection");
        drop(s);
        let c = Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", VERSION + 1).unwrap();
        drop(c);
        let e = Store::open_existing(&path).err().unwrap();
        assert!(e.contains("newer thrum"), "{e}");
    }

    #[test]
    fn a_backup_is_a_new_file_holding_every_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.db");
        let d = doc(1e8);
        let s = Store::open(&path).unwrap();
        s.save(&record(&d)).unwrap();
        s.save(&record(&d)).unwrap();
        let r = Store::open_existing(&path).unwrap();
        let to = dir.path().join("file:copy?.db");
        r.backup(&to).unwrap();
        let e = r.backup(&to).unwrap_err();
        assert!(e.contains("--backup") && e.contains("exists"), "{e}");
        let copy = Store::open_existing(&to).unwrap();
        assert_eq!(copy.list(&Filter::default()).unwrap().len(), 2);
    }

    #[test]
    fn links_and_missing_directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("empty");
        std::fs::write(&target, b"").unwrap();
        let link = dir.path().join("link.db");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for e in [
            Store::open(&link).err().unwrap(),
            Store::open_existing(&link).err().unwrap(),
            check_place(&link).unwrap_err(),
        ] {
            assert!(e.contains("symbolic link") && e.contains("--db"), "{e}");
        }
        assert_eq!(std::fs::metadata(&target).unwrap().len(), 0);
        let deep = dir.path().join("no/such/dir/x.db");
        let e = Store::open(&deep).err().unwrap();
        assert!(e.contains("does not exist") && e.contains("--db"), "{e}");
        assert!(!dir.path().join("no").exists());
        assert!(check_place(Path::new("x.db")).is_ok());
    }

    #[test]
    fn file_uris_escape_what_would_end_them() {
        assert_eq!(file_uri(Path::new("/a/b c/r.db")), "file:/a/b%20c/r.db");
        assert_eq!(file_uri(Path::new("x?y#z%.db")), "file:x%3Fy%23z%25.db");
        assert_eq!(file_uri(Path::new("/é")), "file:/%C3%A9");
    }

    #[test]
    fn utc_times() {
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_795_701_600.5), "2026-11-26T14:00:00Z");
        assert_eq!(rfc3339(951_782_400.0), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn labels_parse() {
        assert_eq!(
            parse_label("cfg=a=b").unwrap(),
            ("cfg".into(), "a=b".into())
        );
        assert!(parse_label("cfg").is_err());
        assert!(parse_label("a b=c").is_err());
        assert!(parse_label("cfg=").is_ok());
        // Looked up, any value: an older thrum saved such labels.
        assert!(parse_label("k=a\u{1b}b").is_ok());
    }

    #[test]
    fn labels_and_names_are_bounded_and_printable() {
        let k = "k".repeat(LABEL_KEY_CHARS);
        assert!(parse_new_label(&format!("{k}=v")).is_ok());
        let e = parse_new_label(&format!("{k}k=v")).unwrap_err();
        assert!(e.contains("65 characters") && e.contains("1 to 64"), "{e}");
        let v = "é".repeat(LABEL_VALUE_CHARS);
        assert!(parse_new_label(&format!("k={v}")).is_ok());
        let e = parse_new_label(&format!("k={}", "x".repeat(120_000))).unwrap_err();
        assert!(
            e.contains("120000 characters") && e.contains("0 to 256"),
            "{e}"
        );
        assert!(e.len() < 300, "the value is not echoed whole: {e}");
        for bad in ["k=a\nb", "k=\u{1b}[2J", "k=a\u{0}", "k=\u{9b}"] {
            let e = parse_new_label(bad).unwrap_err();
            assert!(e.contains("control character"), "{e}");
            assert!(!e.chars().any(char::is_control), "{e:?}");
        }
        assert!(check_name(&"n".repeat(NAME_CHARS)).is_ok());
        assert!(check_name("").is_ok());
        let e = check_name(&"n".repeat(NAME_CHARS + 1)).unwrap_err();
        assert!(
            e.contains("257 characters") && e.contains("0 to 256"),
            "{e}"
        );
        let e = check_name("x\u{1b}]0;owned\u{7}").unwrap_err();
        assert!(!e.chars().any(char::is_control), "{e:?}");
    }
}
