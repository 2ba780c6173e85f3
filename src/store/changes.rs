//! What tells a reader that the store changed: a mark that moves when a
//! run is saved (or removed), cheap enough to ask every few seconds, so
//! that `thrum web`'s pages refresh when a monitor or a run saves into
//! the store they show.

use serde::Serialize;

use super::{Store, at};

/// The store's state as of one read: how many runs, and the newest row's
/// SQLite rowid (which only grows while rows are added). Two marks differ
/// when a run was saved or removed between them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ChangeMark {
    pub runs: i64,
    pub last_rowid: i64,
}

impl ChangeMark {
    /// The mark as one word, for a page to hold and compare.
    pub fn token(&self) -> String {
        format!("{}-{}", self.runs, self.last_rowid)
    }
}

impl Store {
    /// The store's [`ChangeMark`] now: one read of the `runs` table, a
    /// count over its primary key and the largest rowid.
    pub fn change_mark(&self) -> Result<ChangeMark, String> {
        self.conn
            .query_row(
                "SELECT count(*), coalesce(max(rowid), 0) FROM runs",
                [],
                |r| {
                    Ok(ChangeMark {
                        runs: r.get(0)?,
                        last_rowid: r.get(1)?,
                    })
                },
            )
            .map_err(|e| at(&self.path, "cannot read", e))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Labels, Record};
    use super::*;

    #[test]
    fn the_mark_moves_with_each_save_seen_by_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.db");
        let w = Store::open(&path).unwrap();
        let r = Store::open_existing(&path).unwrap();
        let before = r.change_mark().unwrap();
        assert_eq!(before, ChangeMark::default());
        let doc = serde_json::json!({"schema": "thrum.result.v1", "summary": {}});
        w.save(&Record {
            command: "run",
            test: "tcp_rr".into(),
            target: "embedded".into(),
            name: None,
            labels: Labels::new(),
            doc: &doc,
        })
        .unwrap();
        let after = r.change_mark().unwrap();
        assert_eq!(after.runs, 1);
        assert_ne!(after.token(), before.token());
    }
}
