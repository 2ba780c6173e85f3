//! The sets `thrum compare` compares, found in the store by how a user
//! names them: a run's id (a set of one) or `label:KEY=VALUE` (every
//! error-free run so labelled, of one test and target and of its newest
//! run's settings). `thrum compare`, `run --baseline` and `thrum web`'s
//! compare page all find their sides here, so that a label means the same
//! runs wherever it is typed; a result file, which only the command line
//! takes, is the caller's to read.
//!
//! Like is compared with like: [`like_with_like`] refuses results of
//! another kind or test, and a label resolves among the other side's test
//! and target unless told ([`both`]).

use super::compare::{self, Pool, Run, Set};
use super::{Row, Store};
use crate::text::echo;

/// What a set's runs are: the command that made them, the test and the
/// target (as the store files them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kind {
    pub command: String,
    pub test: String,
    pub target: String,
}

impl Kind {
    /// `a run of tcp_stream against 10.0.0.2`.
    pub fn said(&self) -> String {
        format!(
            "a {} of {} against {}",
            if self.command == "run" {
                "run"
            } else {
                &self.command
            },
            echo(&self.test),
            echo(&self.target)
        )
    }
}

/// A side, found: its runs and what they are.
pub struct Found {
    pub set: Set,
    pub kind: Kind,
    /// What a reader should know of how it was found (runs of other
    /// settings left out), one sentence each.
    pub notes: Vec<String>,
}

/// How a side is named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spec {
    /// A stored run's id, or a unique start of one.
    Id(String),
    /// `label:KEY=VALUE`.
    Label(String, String),
    /// A result file (only where files may be named).
    File(String),
}

impl Spec {
    /// `label:KEY=VALUE` (the label checked as the store's rule has it);
    /// else, when `files` may be named, a path that exists; else an id.
    pub fn parse(spec: &str, files: bool) -> Result<Spec, String> {
        if let Some(l) = spec.strip_prefix("label:") {
            let (k, v) = super::parse_label(l).map_err(|e| format!("{}: {e}", echo(spec)))?;
            return Ok(Spec::Label(k, v));
        }
        if files && std::path::Path::new(spec).exists() {
            return Ok(Spec::File(spec.to_string()));
        }
        Ok(Spec::Id(spec.to_string()))
    }
}

/// What `label:` looks for: the test and target (None: those of the
/// newest run so labelled), the newest N.
#[derive(Clone, Debug, Default)]
pub struct Among {
    pub test: Option<String>,
    pub target: Option<String>,
    pub last: Option<u32>,
}

impl Among {
    /// These, the test and target not given taken from `other`'s.
    pub fn beside(&self, other: &Kind) -> Among {
        Among {
            test: self.test.clone().or_else(|| Some(other.test.clone())),
            target: self.target.clone().or_else(|| Some(other.target.clone())),
            last: self.last,
        }
    }
}

/// Why a side was not found.
#[derive(Debug, thiserror::Error)]
pub enum Missing {
    /// Nothing stored by that name, or nothing of the test asked for.
    #[error("{0}")]
    NotFound(String),
    /// The store could not be read.
    #[error("{0}")]
    Store(String),
}

/// Find both sides with `find` (given the side, 0 for A and 1 for B, its
/// spec and what a label looks among): a label resolves among the other
/// side's test and target (an id's, a file's, or the other label's newest
/// run's), unless `given` names them.
pub fn both<E>(
    a: &Spec,
    b: &Spec,
    given: &Among,
    mut find: impl FnMut(usize, &Spec, &Among) -> Result<Found, E>,
) -> Result<(Found, Found), E> {
    if matches!(a, Spec::Label(..)) {
        let fb = find(1, b, given)?;
        let fa = find(0, a, &given.beside(&fb.kind))?;
        Ok((fa, fb))
    } else {
        let fa = find(0, a, given)?;
        let fb = find(1, b, &given.beside(&fa.kind))?;
        Ok((fa, fb))
    }
}

/// One stored run by id (or a unique start of one); `place` names the
/// store in the message of a run not found.
pub fn by_id(store: &Store, id: &str, place: &str) -> Result<Found, Missing> {
    let (row, doc) = store
        .get(id)
        .map_err(Missing::Store)?
        .ok_or_else(|| Missing::NotFound(format!("no run '{}' in {place}", echo(id))))?;
    Ok(Found {
        set: Set {
            name: row.id.clone(),
            settings: row.settings.clone(),
            runs: vec![Run::new(row.id.clone(), doc)],
        },
        kind: kind(&row),
        notes: Vec::new(),
    })
}

fn kind(row: &Row) -> Kind {
    Kind {
        command: row.command.clone(),
        test: row.test.clone(),
        target: row.target.clone(),
    }
}

/// Every error-free run labelled `k=v` of `among`'s test and target
/// (where given; else those of the newest run so labelled), of the newest
/// one's settings (a set of unlike settings would measure their
/// difference as noise; the others are left out, and a note says so).
/// `place` names the store in the message of a label not found.
pub fn by_label(
    store: &Store,
    k: &str,
    v: &str,
    among: &Among,
    place: &str,
) -> Result<Found, Missing> {
    let pair = format!("{}={}", echo(k), echo(v));
    let any = store
        .labelled(k, v, None, None, None)
        .map_err(Missing::Store)?;
    let Some(newest) = any.first() else {
        return Err(Missing::NotFound(format!(
            "no stored run is labelled {pair} (in {place}; runs that failed are left out)"
        )));
    };
    let test = among.test.clone().unwrap_or_else(|| newest.test.clone());
    let target = among
        .target
        .clone()
        .unwrap_or_else(|| newest.target.clone());
    let rows: Vec<&Row> = any
        .iter()
        .filter(|r| r.test == test && r.target == target)
        .collect();
    let Some(first) = rows.first() else {
        let mut kinds: Vec<String> = Vec::new();
        for r in &any {
            let k = format!("{} against {}", echo(&r.test), echo(&r.target));
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        return Err(Missing::NotFound(format!(
            "label:{pair}: no run so labelled is of {} against {} (so labelled: {}); compare compares results of one kind and test (--test and --target choose among them)",
            echo(&test),
            echo(&target),
            kinds.join(", ")
        )));
    };
    let settings = first.settings.clone();
    let mut same: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.settings == settings)
        .collect();
    let others = rows.len() - same.len();
    if let Some(n) = among.last {
        same.truncate(n as usize);
    }
    let mut notes = Vec::new();
    if others > 0 {
        notes.push(format!(
            "label:{pair}: {others} run(s) with other settings than the newest's left out (compare one by its id)"
        ));
    }
    let mut runs = Vec::with_capacity(same.len());
    for r in &same {
        let (_, doc) = store
            .get(&r.id)
            .map_err(Missing::Store)?
            .ok_or_else(|| Missing::Store(format!("run {} vanished from the store", r.id)))?;
        runs.push(Run::new(r.id.clone(), doc));
    }
    let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    Ok(Found {
        set: Set {
            // Raw: the table escapes what it prints, the JSON carries it whole.
            name: format!("{} ({k}={v})", ids.join(" ")),
            settings,
            runs,
        },
        kind: Kind {
            command: first.command.clone(),
            test,
            target,
        },
        notes,
    })
}

/// Results of one kind and test, or the refusal naming both (`what`: how
/// each side is called).
pub fn like_with_like(a: &Kind, b: &Kind, what: [&str; 2]) -> Result<(), String> {
    if a.command != b.command || a.test != b.test {
        return Err(format!(
            "{} is {} and {} {}: compare compares results of one kind and test only (their figures measure different things)",
            what[0],
            a.said(),
            what[1],
            b.said()
        ));
    }
    Ok(())
}

/// The stored runs of each side's settings, to learn noise from, and a
/// warning for each that could not be read.
pub fn pools(store: &Store, sides: &[&Found]) -> (Vec<Pool>, Vec<String>) {
    let (mut out, mut warnings): (Vec<Pool>, Vec<String>) = (Vec::new(), Vec::new());
    for f in sides {
        if out.iter().any(|p| p.settings == f.set.settings) {
            continue;
        }
        let k = &f.kind;
        match store.pool(
            &k.command,
            &k.test,
            &k.target,
            &f.set.settings,
            compare::LEARN_FROM,
        ) {
            Ok(p) => out.push(p),
            Err(e) => warnings.push(format!("{e}: noise not learned from stored runs")),
        }
    }
    (out, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(command: &str, test: &str) -> Kind {
        Kind {
            command: command.into(),
            test: test.into(),
            target: "embedded".into(),
        }
    }

    #[test]
    fn another_kind_or_test_is_refused_naming_both() {
        assert!(like_with_like(&kind("run", "tcp_rr"), &kind("run", "tcp_rr"), ["A", "B"]).is_ok());
        let e = like_with_like(
            &kind("run", "tcp_rr"),
            &kind("run", "tcp_stream"),
            ["A", "B"],
        )
        .unwrap_err();
        assert!(
            e.contains("A is a run of tcp_rr against embedded")
                && e.contains("B a run of tcp_stream")
                && e.contains("one kind and test"),
            "{e}"
        );
        assert!(
            like_with_like(&kind("curve", "udp_rr"), &kind("run", "udp_rr"), ["A", "B"]).is_err()
        );
    }

    #[test]
    fn a_spec_is_a_label_a_file_where_files_may_be_named_or_an_id() {
        assert_eq!(
            Spec::parse("label:case=a", true).unwrap(),
            Spec::Label("case".into(), "a".into())
        );
        assert!(Spec::parse("label:=a", false).is_err());
        let here = env!("CARGO_MANIFEST_DIR");
        assert_eq!(
            Spec::parse(here, true).unwrap(),
            Spec::File(here.to_string())
        );
        assert_eq!(
            Spec::parse(here, false).unwrap(),
            Spec::Id(here.to_string())
        );
        assert_eq!(Spec::parse("0aa1", true).unwrap(), Spec::Id("0aa1".into()));
    }
}
